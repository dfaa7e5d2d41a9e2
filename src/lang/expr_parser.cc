// The expression grammar of `.kiln`. Binary operators, lowest precedence first, each level
// left-associative (C's order, but with one level for every comparison; language version 3
// added the bitwise levels and shifts):
//   expr           := bit_xor { '|' bit_xor }
//   bit_xor        := bit_and { '^' bit_and }
//   bit_and        := comparison { '&' comparison }
//   comparison     := shift { ('<' | '<=' | '>' | '>=' | '==' | '!=') shift }
//   shift          := additive { ('<<' | '>>') additive }
//   additive       := multiplicative { ('+' | '-') multiplicative }
//   multiplicative := unary { ('*' | '/') unary }
//   unary          := ('-' | '~') unary | primary
//   primary        := NUMBER | 'true' | 'false' | '(' expr ')' | NAME | NAME '[' [expr {',' expr}] ']'
//                   | NAME '.' 'merge' ['[' ... ']'] | NAME '(' [expr {',' expr}] ')'
// Names are resolved later, by ir::complete_statement(); calls are resolved here. A constant
// expression (an INIT, language version 2) is the additive grammar, evaluated when parsed.
#include <algorithm>
#include <cmath>
#include <string>

#include "base/suggest.h"
#include "lang/parser_impl.h"

namespace kiln::lang::internal {

namespace {

using ir::Op;

// The binary operator `kind` stands for at precedence `level` (kBinaryLevels in parser_impl.h:
// 0 is `|`, the lowest), if any.
bool binary_operator(int level, TokenKind kind, Op* op) {
  static constexpr struct {
    int level;
    TokenKind kind;
    Op op;
  } kOperators[] = {
      {0, TokenKind::kPipe, Op::kBitOr},  {1, TokenKind::kCaret, Op::kBitXor}, {2, TokenKind::kAmp, Op::kBitAnd},
      {3, TokenKind::kLt, Op::kLt},       {3, TokenKind::kLe, Op::kLe},        {3, TokenKind::kGt, Op::kGt},
      {3, TokenKind::kGe, Op::kGe},       {3, TokenKind::kEq, Op::kEq},        {3, TokenKind::kNe, Op::kNe},
      {4, TokenKind::kShl, Op::kShl},     {4, TokenKind::kShr, Op::kShr},      {5, TokenKind::kPlus, Op::kAdd},
      {5, TokenKind::kMinus, Op::kSub},   {6, TokenKind::kStar, Op::kMul},     {6, TokenKind::kSlash, Op::kDiv},
  };
  for (const auto& o : kOperators) {
    if (o.level == level && o.kind == kind) {
      *op = o.op;
      return true;
    }
  }
  return false;
}

// The functions callable by name besides the casts, which are the type names (fma is made by
// the optimizer, never written).
constexpr Op kFunctions[] = {Op::kExp, Op::kLog, Op::kSqrt, Op::kRsqrt, Op::kTanh, Op::kSigmoid,
                             Op::kRelu, Op::kAbs, Op::kSin, Op::kCos, Op::kErf, Op::kFloor, Op::kCeil,
                             Op::kMax, Op::kMin, Op::kPow, Op::kSelect};

bool function(std::string_view name, Op* op) {
  if (std::optional<ir::DType> type = ir::dtype_from_name(name)) {  // a cast, `u8(e)`
    *op = ir::cast_op(*type);
    return true;
  }
  for (Op f : kFunctions) {
    if (ir::op_name(f) == name) {
      *op = f;
      return true;
    }
  }
  return false;
}

bool reduction(std::string_view name, ir::Reduce* reduce) {
  if (name == "sum") *reduce = ir::Reduce::kSum;
  else if (name == "prod") *reduce = ir::Reduce::kProd;
  else if (name == "mean") *reduce = ir::Reduce::kMean;
  else if (name == "max") *reduce = ir::Reduce::kMax;
  else if (name == "min") *reduce = ir::Reduce::kMin;
  else if (name == "argmax") *reduce = ir::Reduce::kArgmax;
  else if (name == "argmin") *reduce = ir::Reduce::kArgmin;
  else return false;
  return true;
}

std::string arguments(size_t n) { return std::to_string(n) + (n == 1 ? " argument" : " arguments"); }

}  // namespace

PExpr Parser::combine(Op op, PExpr a, PExpr b, ir::SourceLoc loc) {
  if (!a || !b) return {};
  int depth = std::max(a.depth, b.depth) + 1;
  if (depth > ir::kMaxExprDepth) {
    error(loc, "expression is too deep (more than " + std::to_string(ir::kMaxExprDepth) +
                   " levels of operations); split it into several statements");
    return {};
  }
  return PExpr{ir::raw_op(op, {a.expr, b.expr}, loc), depth};
}

PExpr Parser::parse_expr() {
  if (++nesting_ > ir::kMaxExprDepth) {
    error(cur_.loc, "expression nested too deeply (more than " + std::to_string(ir::kMaxExprDepth) +
                        " levels); simplify it");
    --nesting_;
    return {};
  }
  PExpr e = parse_binary(0);
  --nesting_;
  return e;
}

PExpr Parser::parse_additive() { return parse_binary(kAdditiveLevel); }

PExpr Parser::parse_binary(int level) {
  if (level == kBinaryLevels) return parse_unary();
  PExpr left = parse_binary(level + 1);
  Op op;
  while (left && binary_operator(level, cur_.kind, &op)) {
    ir::SourceLoc loc = cur_.loc;
    advance();
    left = combine(op, left, parse_binary(level + 1), loc);
  }
  return left;
}

PExpr Parser::parse_unary() {
  if (!at(TokenKind::kMinus) && !at(TokenKind::kTilde)) return parse_primary();
  if (++nesting_ > ir::kMaxExprDepth) {
    error(cur_.loc, "expression nested too deeply (more than " + std::to_string(ir::kMaxExprDepth) +
                        " levels); simplify it");
    --nesting_;
    return {};
  }
  const Op op = at(TokenKind::kMinus) ? Op::kNeg : Op::kBitNot;
  ir::SourceLoc loc = cur_.loc;
  advance();
  PExpr operand = parse_unary();
  --nesting_;
  if (!operand) return {};
  if (operand.depth + 1 > ir::kMaxExprDepth) {
    error(loc, "expression is too deep (more than " + std::to_string(ir::kMaxExprDepth) +
                   " levels of operations); split it into several statements");
    return {};
  }
  return PExpr{ir::raw_op(op, {operand.expr}, loc), operand.depth + 1};
}

bool Parser::parse_subscripts(std::vector<ir::RawExprRef>* out, int* depth) {
  open();  // '['
  *depth = 0;
  while (!at(TokenKind::kRBracket)) {
    PExpr e = parse_expr();
    if (!e) return false;
    out->push_back(e.expr);
    *depth = std::max(*depth, e.depth);
    if (!at(TokenKind::kComma)) break;
    advance();
  }
  return close(TokenKind::kRBracket, "after the subscripts");
}

PExpr Parser::parse_primary() {
  const Token token = cur_;
  switch (token.kind) {
    case TokenKind::kNumber:
      advance();
      return PExpr{ir::raw_number(token.number, token.is_float, token.loc), 1};
    case TokenKind::kLParen: {
      open();
      PExpr e = parse_expr();
      if (!e || !close(TokenKind::kRParen, "to close the parenthesis")) return {};
      return e;
    }
    case TokenKind::kIdent:
      break;
    case TokenKind::kNewline:
      if (open_.empty()) {
        error(token.loc, "expected an expression, found end of line (a statement goes on to the "
                         "next line only inside brackets)");
        return {};
      }
      [[fallthrough]];
    default:
      unexpected("an expression");
      return {};
  }
  if (token.text == "where") {
    unexpected("an expression");
    return {};
  }
  if (token.text == "true" || token.text == "false") {  // keywords (version 3): typing makes them bool
    advance();
    return PExpr{ir::raw_name(std::string(token.text), token.loc), 1};
  }
  if (ir::is_keyword(token.text)) {
    error(token.loc, "'" + std::string(token.text) + "' is a keyword and cannot be used as a value");
    return {};
  }
  const std::string name(token.text);
  advance();
  if (at(TokenKind::kLParen)) return parse_call(token);
  bool merge = false;
  if (at(TokenKind::kDot)) {
    advance();
    if (!at_word("merge")) {
      unexpected("'merge' after '.' (as in " + name + ".merge[i])");
      return {};
    }
    advance();
    merge = true;
  }
  if (!merge && !at(TokenKind::kLBracket)) return PExpr{ir::raw_name(name, token.loc), 1};
  std::vector<ir::RawExprRef> subs;
  int depth = 0;
  if (at(TokenKind::kLBracket) && !parse_subscripts(&subs, &depth)) return {};
  if (depth + 1 > ir::kMaxExprDepth) {
    error(token.loc, "expression is too deep (more than " + std::to_string(ir::kMaxExprDepth) +
                         " levels); split it into several statements");
    return {};
  }
  return PExpr{merge ? ir::raw_merge(name, std::move(subs), token.loc)
                     : ir::raw_tensor(name, std::move(subs), token.loc),
               depth + 1};
}

PExpr Parser::parse_call(const Token& name_token) {
  const std::string name(name_token.text);
  const ir::SourceLoc loc = name_token.loc;
  open();  // '('
  std::vector<ir::RawExprRef> args;
  int depth = 0;
  while (!at(TokenKind::kRParen)) {
    PExpr e = parse_expr();
    if (!e) return {};
    args.push_back(e.expr);
    depth = std::max(depth, e.depth);
    if (!at(TokenKind::kComma)) break;
    advance();
  }
  if (!close(TokenKind::kRParen, "after the arguments of " + name)) return {};
  if (depth + 1 > ir::kMaxExprDepth) {
    error(loc, "expression is too deep (more than " + std::to_string(ir::kMaxExprDepth) +
                   " levels); split it into several statements");
    return {};
  }
  const size_t n = args.size();
  ir::Reduce reduce;
  Op op;
  if ((name == "max" || name == "min") && n != 1 && n != 2) {
    error(loc, name + " takes 1 argument (a reduction) or 2 (elementwise), but " +
                   std::to_string(n) + (n == 1 ? " is" : " are") + " given");
    return {};
  }
  if (reduction(name, &reduce) && (n == 1 || (name != "max" && name != "min"))) {
    if (n != 1) {
      error(loc, name + " is a reduction and takes 1 argument, but " + std::to_string(n) +
                     (n == 1 ? " is" : " are") + " given");
      return {};
    }
    return PExpr{ir::raw_reduce(reduce, args[0], loc), depth + 1};
  }
  if (function(name, &op)) {
    const size_t arity = static_cast<size_t>(ir::op_arity(op));
    if (n != arity) {
      error(loc, name + " takes " + arguments(arity) + ", but " + std::to_string(n) +
                     (n == 1 ? " is" : " are") + " given");
      return {};
    }
    return PExpr{ir::raw_op(op, std::move(args), loc), depth + 1};
  }
  if (name == "uniform" || name == "normal") {
    error(loc, name + "(...) is an initializer; it is allowed only after '=' in a declaration");
  } else if (declared(name)) {
    error(loc, "'" + name + "' is a tensor, not a function: read it with brackets, " + name + "[...]");
  } else {
    std::vector<std::string> names = dtype_names();
    for (Op f : kFunctions) names.emplace_back(ir::op_name(f));
    for (const char* r : {"sum", "prod", "mean", "argmax", "argmin"}) names.emplace_back(r);
    error(loc, "unknown function '" + name +
                   "'; the functions are exp, log, sqrt, rsqrt, tanh, sigmoid, relu, abs, sin, "
                   "cos, erf, floor, ceil, max, min, pow, select, the casts to each type (" +
                   std::string(ir::dtype_list()) + "), and the reductions sum, prod, max, min, mean, argmax, argmin" +
                   did_you_mean(name, names));
  }
  return {};
}

// Constant expressions (language version 2), where INITs and const values stand.
bool Parser::constant_expression(double* value, const char* what) {
  if (!at(TokenKind::kNumber) && !at(TokenKind::kMinus) && !at(TokenKind::kLParen) && !at(TokenKind::kIdent)) {
    return unexpected(what);
  }
  PExpr e = parse_additive();
  if (!e) return false;
  std::optional<double> v = constant_value(*e.expr);
  if (!v) return false;
  *value = *v;
  return true;
}

std::optional<double> Parser::constant_value(const ir::RawExpr& e) {
  switch (e.kind) {
    case ir::RawExpr::Kind::kNumber:
      return e.number;
    case ir::RawExpr::Kind::kName: {
      if (e.name == "true" || e.name == "false") return e.name == "true" ? 1.0 : 0.0;
      std::vector<std::string> consts;
      for (const ir::TensorNode& n : nodes_) {
        const bool value = n.role == ir::Role::kConst && n.init.kind == ir::Init::Kind::kValue;
        if (value) consts.push_back(n.name);
        if (n.name != e.name) continue;
        if (value) return n.init.a;
        error(e.loc, "'" + e.name + "' is " + (n.role == ir::Role::kConst ? "a const with a random value"
                                                                           : "a " + std::string(role_name(n.role))) +
                         ": a constant expression reads numbers and consts with a value");
        return std::nullopt;
      }
      const bool size = std::any_of(sizes_.begin(), sizes_.end(), [&](const ir::SizeDecl& s) { return s.name == e.name; });
      if (!size && ir::predeclared_literal(e.name)) return ir::predeclared_literal(e.name);  // inf, nan
      if (size) {
        error(e.loc, "'" + e.name + "' is a size: a constant expression reads numbers and consts with a value");
        return std::nullopt;
      }
      error(e.loc, "unknown name '" + e.name + "' in a constant expression (it reads numbers and consts declared before)" +
                       did_you_mean(e.name, consts));
      return std::nullopt;
    }
    case ir::RawExpr::Kind::kOp: {
      const bool arithmetic = e.op == ir::Op::kAdd || e.op == ir::Op::kSub || e.op == ir::Op::kMul ||
                              e.op == ir::Op::kDiv || e.op == ir::Op::kNeg;
      if (!arithmetic) {
        error(e.loc, "'" + std::string(ir::op_name(e.op)) + "' in a constant expression: it takes + - * / only");
        return std::nullopt;
      }
      std::vector<double> args;
      for (const ir::RawExprRef& a : e.args) {
        std::optional<double> v = constant_value(*a);
        if (!v) return std::nullopt;
        args.push_back(*v);
      }
      double v = 0;
      const bool finite = std::all_of(args.begin(), args.end(), [](double a) { return std::isfinite(a); });
      switch (e.op) {
        case ir::Op::kNeg: v = -args[0]; break;
        case ir::Op::kAdd: v = args[0] + args[1]; break;
        case ir::Op::kSub: v = args[0] - args[1]; break;
        case ir::Op::kMul: v = args[0] * args[1]; break;
        default:
          if (args[1] == 0) {
            error(e.loc, "division by zero in a constant expression");
            return std::nullopt;
          }
          v = args[0] / args[1];
      }
      // inf and nan propagate (`-inf`, `inf * 2`); finite numbers must not overflow.
      if (finite && !std::isfinite(v)) {
        error(e.loc, "the constant expression overflows (its value is not a finite number)");
        return std::nullopt;
      }
      return v;
    }
    default:
      error(e.loc, "a constant expression reads numbers and consts, not tensors or reductions");
      return std::nullopt;
  }
}

}  // namespace kiln::lang::internal
