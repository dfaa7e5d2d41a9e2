// The `.kiln` parser (kiln/lang/parser.h): file structure, declarations, routine blocks and
// statements. Expressions are in expr_parser.cc, the lexer in lexer.cc.
#include "kiln/lang/parser.h"

#include <algorithm>
#include <cmath>

#include "kiln/ir/call.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/diagnostics.h"
#include "lang/parser_impl.h"
#include "kiln/ir/memory_mode.h"
#include "base/suggest.h"

namespace kiln::lang {

namespace internal {

namespace {

bool role_of(std::string_view word, ir::Role* role) {
  static constexpr std::pair<std::string_view, ir::Role> kRoles[] = {
      {"input", ir::Role::kInput}, {"output", ir::Role::kOutput}, {"param", ir::Role::kParam},
      {"tensor", ir::Role::kTensor}, {"const", ir::Role::kConst}};
  for (const auto& [name, r] : kRoles) {
    if (word == name) {
      *role = r;
      return true;
    }
  }
  return false;
}

std::string line_of(ir::SourceLoc loc) {
  return loc.line > 0 ? " on line " + std::to_string(loc.line) : std::string();
}

}  // namespace

Parser::Parser(std::string_view text, std::string file_name)
    : text_(text), file_name_(std::move(file_name)), lexer_(text, &diagnostics_) {}

const Token& Parser::peek() {
  if (!peeked_) peeked_ = lexer_.next();
  return *peeked_;
}

void Parser::advance() {
  bool skipped = false;
  for (;;) {
    if (peeked_) {
      cur_ = *peeked_;
      peeked_.reset();
    } else {
      cur_ = lexer_.next();
    }
    if (cur_.kind == TokenKind::kNewline && !open_.empty()) {
      skipped = true;
      continue;
    }
    break;
  }
  cur_starts_line_ = skipped;
}

bool Parser::open() {
  open_.push_back(cur_);
  advance();
  return true;
}

bool Parser::close(TokenKind closer, const std::string& context) {
  if (!at(closer)) {
    std::string c = closer == TokenKind::kRParen ? "')'" : "']'";
    return unexpected("',' or " + c + " " + context);
  }
  if (!open_.empty()) open_.pop_back();
  advance();
  return true;
}

void Parser::error(ir::SourceLoc loc, std::string message) {
  diagnostics_.push_back(ir::Diagnostic{loc, std::move(message)});
}

bool Parser::unexpected(const std::string& expected) {
  if (!open_.empty() && (cur_starts_line_ || at(TokenKind::kEnd))) {
    const Token& b = open_.back();
    const bool paren = b.kind == TokenKind::kLParen;
    error(b.loc, std::string("this '") + (paren ? "(" : "[") + "' is not closed; add '" +
                     (paren ? ")" : "]") +
                     "' (a statement goes on to the next line only inside brackets)");
    resume_here_ = cur_starts_line_;
    return false;
  }
  if (at(TokenKind::kError)) return false;  // the lexer reported it
  error(cur_.loc, "expected " + expected + ", found " + describe(cur_));
  return false;
}

void Parser::recover() {
  open_.clear();
  nesting_ = 0;
  if (resume_here_) {
    // The statement ran on into this line through an unclosed bracket: this line is new.
    resume_here_ = false;
    cur_starts_line_ = false;
    return;
  }
  while (!at_end_of_statement()) advance();
}

bool Parser::end_of_line() {
  if (at_end_of_statement()) return true;
  return unexpected("end of line");
}

const ir::TensorNode* Parser::declared(std::string_view name) const {
  auto it = node_positions_.find(name);
  return it == node_positions_.end() ? nullptr : &nodes_[it->second];
}

int Parser::routine_for_main() {
  if (main_routine_ < 0) {
    main_routine_ = static_cast<int>(routines_.size());
    ir::Routine main;
    main.name = "main";
    main.loc = cur_.loc;
    routines_.push_back(std::move(main));
  }
  return main_routine_;
}

bool Parser::signed_number(double* value, const char* what) {
  bool negative = false;
  if (at(TokenKind::kMinus)) {
    negative = true;
    advance();
  }
  if (!at(TokenKind::kNumber)) return unexpected(what);
  *value = negative ? -cur_.number : cur_.number;
  advance();
  return true;
}

bool Parser::parse_declaration_rest(ir::TensorNode* node, std::optional<ir::SourceLoc>* init_loc) {
  if (!at(TokenKind::kColon)) {
    return unexpected("':' after the name, as in `" + std::string(role_name(node->role)) + " " +
                      node->name + " : f32[4]`");
  }
  advance();
  const std::string types(ir::dtype_list());
  if (!at(TokenKind::kIdent)) return unexpected("a type (" + types + ")");
  if (std::optional<ir::DType> type = ir::dtype_from_name(cur_.text)) {
    node->dtype = *type;
  } else {
    error(cur_.loc, "unknown type '" + std::string(cur_.text) + "'; the types are " + types +
                        did_you_mean(cur_.text, dtype_names()));
  }
  advance();
  if (at(TokenKind::kLBracket)) {
    open();
    std::vector<ir::SizeExpr> dims;
    while (!at(TokenKind::kRBracket)) {
      if (!at(TokenKind::kNumber) && !at(TokenKind::kIdent) && !at(TokenKind::kMinus) && !at(TokenKind::kLParen)) {
        return unexpected("a dimension size (a positive integer, a size or an integer const)");
      }
      const ir::SourceLoc dim_at = cur_.loc;
      PExpr dim = parse_additive();
      if (!dim) return false;
      // A wrong dimension is reported and stands as 1, so that later uses do not cascade.
      dims.push_back(ir::declared_dimension(*dim.expr, dim_at, *node, sizes_, &diagnostics_, nodes_).value_or(ir::SizeExpr::constant(1)));
      if (!at(TokenKind::kComma)) break;
      advance();
    }
    if (!close(TokenKind::kRBracket, "after the dimension sizes")) return false;
    const bool sized = std::any_of(dims.begin(), dims.end(), [](const ir::SizeExpr& d) { return !d.is_constant(); });
    for (const ir::SizeExpr& d : dims) node->dims.push_back(d.is_constant() ? d.offset : 1);
    if (sized) node->sized_dims = std::move(dims);
  }
  if (!at(TokenKind::kAssign)) return parse_memory_mode(node);
  *init_loc = cur_.loc;
  advance();
  ir::Init& init = node->init;
  if (at_word("uniform") || at_word("normal")) {
    init.kind = cur_.text == "uniform" ? ir::Init::Kind::kUniform : ir::Init::Kind::kNormal;
    const char* first = init.kind == ir::Init::Kind::kUniform ? "LO" : "MEAN";
    const char* second = init.kind == ir::Init::Kind::kUniform ? "HI" : "STD";
    const std::string function(cur_.text);
    advance();
    if (!at(TokenKind::kLParen)) return unexpected("'(' after " + function);
    open();
    if (!constant_expression(&init.a, (std::string("a number (") + first + ")").c_str())) return false;
    if (!at(TokenKind::kComma)) return unexpected("','");
    advance();
    if (!constant_expression(&init.b, (std::string("a number (") + second + ")").c_str())) return false;
    if (!close(TokenKind::kRParen, "after the initializer's two numbers")) return false;
    return parse_memory_mode(node);
  }
  init.kind = ir::Init::Kind::kValue;
  if (!constant_expression(&init.a, "a number, uniform(LO, HI) or normal(MEAN, STD) after '='")) return false;
  return parse_memory_mode(node);
}

bool Parser::parse_memory_mode(ir::TensorNode* node) {
  if (!at(TokenKind::kAt)) return true;
  advance();
  if (!at(TokenKind::kIdent)) return unexpected("a memory mode after '@' (virtual, local, device or hosted)");
  static const std::vector<std::pair<std::string, ir::MemoryMode>> kModes = {
      {"virtual", ir::MemoryMode::kVirtual},
      {"local", ir::MemoryMode::kLocal},
      {"device", ir::MemoryMode::kOnDevice},
      {"hosted", ir::MemoryMode::kHosted},
  };
  const std::string word(cur_.text);
  const ir::SourceLoc loc = cur_.loc;
  advance();
  for (const auto& [name, mode] : kModes) {
    if (name != word) continue;
    // A request the role cannot take is refused here; one that lowering cannot honour (a
    // virtual tensor read by two kernels) is refused when the program is lowered.
    if (Status request = ir::check_memory_mode_request(*node, mode); !request.ok()) {
      error(loc, request.message());
    } else {
      node->memory = mode;
    }
    return true;
  }
  std::vector<std::string> names;
  for (const auto& entry : kModes) names.push_back("@" + entry.first);
  error(loc, "unknown memory mode '@" + word + "' (the modes are @virtual, @local, @device and @hosted)" +
                 did_you_mean("@" + word, names));
  return true;
}

bool Parser::at_size_declaration() {
  return at_word("size") && peek().kind == TokenKind::kIdent;
}

bool Parser::parse_size_declaration() {
  advance();  // `size`
  ir::SizeDecl size{std::string(cur_.text), cur_.loc};
  advance();
  if (ir::is_keyword(size.name)) {
    error(size.loc, "'" + size.name + "' is a keyword and cannot be used as a name");
  } else if (const ir::TensorNode* node = declared(size.name)) {
    error(size.loc, "'" + size.name + "' is already declared" + line_of(node->loc) + "; every name is declared once");
  } else if (auto it = std::find_if(sizes_.begin(), sizes_.end(), [&](const ir::SizeDecl& s) { return s.name == size.name; });
             it != sizes_.end()) {
    error(size.loc, "size '" + size.name + "' is already declared" + line_of(it->loc) + "; every name is declared once");
  } else {
    sizes_.push_back(std::move(size));
  }
  return true;
}

bool Parser::parse_declaration() {
  ir::TensorNode node;
  role_of(cur_.text, &node.role);
  advance();
  if (!at(TokenKind::kIdent)) {
    return unexpected("a name after '" + std::string(role_name(node.role)) + "'");
  }
  node.name = std::string(cur_.text);
  node.loc = cur_.loc;
  advance();
  std::optional<ir::SourceLoc> init_loc;
  const bool ok = parse_declaration_rest(&node, &init_loc);
  // Declared even if the line has errors, so that later uses do not cascade.
  if (const ir::TensorNode* previous = declared(node.name)) {
    error(node.loc, "'" + node.name + "' is already declared" + line_of(previous->loc) +
                        "; every name is declared once");
    return ok;
  }
  for (const ir::SizeDecl& size : sizes_) {
    if (size.name != node.name) continue;
    error(node.loc, "'" + node.name + "' is already declared as a size" + line_of(size.loc) +
                        "; every name is declared once");
    return ok;
  }
  if (ok) check_declaration(node, &diagnostics_, init_loc);
  else if (ir::is_keyword(node.name)) check_declaration(node, &diagnostics_);
  node.id = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(node));
  node_positions_.emplace(nodes_.back().name, nodes_.size() - 1);
  return ok;
}

bool Parser::parse_bound(ir::RawStatement* statement) {
  if (!at(TokenKind::kIdent) || ir::is_keyword(cur_.text)) {
    return unexpected("an index name in the bound (as in `where k < 3`)");
  }
  ir::RawBound bound;
  bound.index = std::string(cur_.text);
  bound.loc = cur_.loc;
  advance();
  if (!at(TokenKind::kLt)) return unexpected("'<' in `where " + bound.index + " < N`");
  advance();
  PExpr limit = parse_additive();
  if (!limit) return false;
  bound.limit = limit.expr;
  statement->where.push_back(std::move(bound));
  return true;
}

bool Parser::parse_call(int routine) {
  ir::RawCall call;
  call.loc = cur_.loc;
  advance();
  if (!at(TokenKind::kIdent) || ir::is_keyword(cur_.text)) return unexpected("a function name after 'call'");
  call.function = std::string(cur_.text);
  call.function_loc = cur_.loc;
  advance();
  if (!at(TokenKind::kLParen)) return unexpected("'(' after the function name, as in `call sort(x) -> y`");
  if (!open()) return false;
  while (!at(TokenKind::kRParen)) {
    if (!at(TokenKind::kIdent) || ir::is_keyword(cur_.text)) {
      return unexpected("a tensor name or an attribute NAME=NUMBER");
    }
    ir::RawCallArg arg;
    arg.name = std::string(cur_.text);
    arg.loc = cur_.loc;
    advance();
    if (at(TokenKind::kAssign)) {
      advance();
      arg.attribute = true;
      if (!signed_number(&arg.value, "a number after the attribute's '='")) return false;
    }
    call.args.push_back(std::move(arg));
    if (at(TokenKind::kComma)) {
      advance();
    } else if (!at(TokenKind::kRParen)) {
      return unexpected("',' or ')' in the call's arguments");
    }
  }
  if (!close(TokenKind::kRParen, "the call's arguments")) return false;
  if (!at(TokenKind::kArrow)) return unexpected("'->' and the outputs, as in `call sort(x) -> y`");
  advance();
  for (;;) {
    if (!at(TokenKind::kIdent) || ir::is_keyword(cur_.text)) return unexpected("an output tensor name");
    call.outputs.emplace_back(std::string(cur_.text), cur_.loc);
    advance();
    if (!at(TokenKind::kComma)) break;
    advance();
  }
  pending_.push_back(Pending{ir::RawStatement{}, std::move(call), nodes_.size(), sizes_.size(), routine});
  return true;
}

bool Parser::parse_statement(int routine) {
  if (at_word("call")) return parse_call(routine);
  if (!at(TokenKind::kIdent)) return unexpected("a declaration, a statement or a routine block");
  if (ir::is_keyword(cur_.text)) {
    error(cur_.loc, "'" + std::string(cur_.text) +
                        "' cannot start a statement; a statement starts with the tensor it "
                        "assigns to, like y[i] = x[i]");
    return false;
  }
  ir::RawStatement s;
  s.target = std::string(cur_.text);
  s.loc = cur_.loc;
  advance();
  if (at(TokenKind::kDot)) {
    error(cur_.loc, "cannot assign to a merge buffer; it is read-only (assign to the tensor itself)");
    return false;
  }
  if (at(TokenKind::kLBracket)) {
    int depth = 0;
    if (!parse_subscripts(&s.target_subscripts, &depth)) return false;
  }
  switch (cur_.kind) {
    case TokenKind::kAssign: s.accum = ir::Accum::kAssign; break;
    case TokenKind::kPlusAssign: s.accum = ir::Accum::kAdd; break;
    case TokenKind::kMinusAssign: s.accum = ir::Accum::kSub; break;
    case TokenKind::kStarAssign: s.accum = ir::Accum::kMul; break;
    default:
      return unexpected("'=', '+=', '-=' or '*=' after the target '" + s.target + "'");
  }
  advance();
  PExpr rhs = parse_expr();
  if (!rhs) return false;
  s.rhs = rhs.expr;
  if (at_word("where")) {
    advance();
    for (;;) {
      if (!parse_bound(&s)) return false;
      if (!at(TokenKind::kComma)) break;
      advance();
    }
  }
  pending_.push_back(Pending{std::move(s), std::nullopt, nodes_.size(), sizes_.size(), routine});
  return true;
}

bool Parser::parse_routine() {
  const Token keyword = cur_;
  advance();
  if (!at(TokenKind::kIdent)) return unexpected("a routine name after 'routine'");
  const Token name = cur_;
  const std::string routine_name(name.text);
  if (ir::is_keyword(routine_name)) {
    error(name.loc, "'" + routine_name + "' is a keyword and cannot be used as a name");
  }
  advance();
  if (!at(TokenKind::kLBrace)) return unexpected("'{' after the routine name");
  advance();
  auto [previous, inserted] = block_names_.emplace(routine_name, name.loc);
  if (!inserted) {
    error(name.loc, "routine '" + routine_name + "' is already defined" + line_of(previous->second) +
                        "; routine names are unique");
  }
  if (routine_name == "main") {
    has_main_block_ = true;
    main_block_loc_ = name.loc;
  }
  const int index = static_cast<int>(routines_.size());
  ir::Routine routine;
  routine.name = routine_name;
  routine.loc = name.loc;
  routines_.push_back(std::move(routine));

  ir::Role role;
  while (!too_many_errors()) {
    if (at(TokenKind::kNewline)) {
      advance();
    } else if (at(TokenKind::kRBrace)) {
      advance();
      return end_of_line();
    } else if (at(TokenKind::kEnd)) {
      error(keyword.loc, "routine '" + routine_name +
                             "' is not closed: add '}' on a line after its last statement");
      return true;
    } else if (at_word("routine")) {
      error(cur_.loc, "a routine starts inside routine '" + routine_name + "': close '" +
                          routine_name + "' with '}' first");
      return true;
    } else if (cur_.kind == TokenKind::kIdent && role_of(cur_.text, &role)) {
      error(cur_.loc, "declarations go outside routine blocks; move it above the routine (or is "
                      "a '}' missing before this line?)");
      if (!parse_declaration() || !end_of_line()) recover();
    } else {
      bool ok = parse_statement(index);
      if (ok && !at_end_of_statement() && !at(TokenKind::kRBrace)) ok = unexpected("end of line");
      if (!ok) recover();
    }
  }
  return true;
}

ParseResult Parser::run() {
  advance();
  ir::Role role;
  while (!at(TokenKind::kEnd) && !too_many_errors()) {
    if (at(TokenKind::kNewline)) {
      advance();
      continue;
    }
    bool ok;
    if (at_word("routine")) {
      ok = parse_routine();
    } else if (cur_.kind == TokenKind::kIdent && role_of(cur_.text, &role)) {
      ok = parse_declaration() && end_of_line();
    } else if (at_size_declaration()) {
      ok = parse_size_declaration() && end_of_line();
    } else if (at(TokenKind::kRBrace)) {
      error(cur_.loc, "'}' without a routine block to close; remove it");
      ok = false;
    } else {
      ok = parse_statement(routine_for_main()) && end_of_line();
    }
    if (!ok) recover();
  }
  const bool stopped = too_many_errors() && !at(TokenKind::kEnd);
  if (has_main_block_ && main_routine_ >= 0) {
    error(main_block_loc_, "routine 'main' conflicts with the top-level statements, which form "
                           "routine main; move them into the block, or rename the block");
  }
  ir::NodeLookup lookup(nodes_);
  for (const Pending& p : pending_) {
    ir::Routine& routine = routines_[p.routine];
    if (p.call) {
      std::optional<ir::Call> c = ir::complete_call(*p.call, nodes_, p.visible_nodes,
                                                    static_cast<int>(routine.statements.size()), &diagnostics_, &lookup);
      if (c) routine.calls.push_back(std::move(*c));
      continue;
    }
    const std::vector<ir::SizeDecl> sizes(sizes_.begin(), sizes_.begin() + static_cast<std::ptrdiff_t>(p.visible_sizes));
    std::optional<ir::CompletedStatement> c =
        ir::complete_statement(p.statement, nodes_, p.visible_nodes, &diagnostics_, &lookup, &sizes);
    if (!c) continue;
    nodes_.insert(nodes_.end(), c->temporaries.begin(), c->temporaries.end());
    lookup.add_appended();
    for (ir::Assignment& a : c->assignments) routine.statements.push_back(std::move(a));
  }

  ParseResult result;
  std::stable_sort(diagnostics_.begin(), diagnostics_.end(),
                   [](const ir::Diagnostic& a, const ir::Diagnostic& b) {
                     return std::pair(a.loc.line, a.loc.column) < std::pair(b.loc.line, b.loc.column);
                   });
  if (stopped || diagnostics_.size() > kMaxDiagnostics) {
    diagnostics_.resize(std::min(diagnostics_.size(), kMaxDiagnostics));
    diagnostics_.push_back(ir::Diagnostic{diagnostics_.back().loc,
                                          "too many errors; stopped after " +
                                              std::to_string(kMaxDiagnostics)});
  }
  if (diagnostics_.empty()) {
    ir::Program program;
    program.file = file_name_;
    program.sizes = sizes_;
    program.nodes = nodes_;
    if (main_routine_ >= 0) program.routines.push_back(routines_[main_routine_]);
    for (size_t r = 0; r < routines_.size(); ++r) {
      if (static_cast<int>(r) != main_routine_) program.routines.push_back(routines_[r]);
    }
    Status valid = ir::validate_program(program);
    if (valid.ok()) {
      result.program = std::move(program);
    } else {
      diagnostics_.push_back(ir::Diagnostic{ir::SourceLoc{1, 1}, "internal error: " + valid.message()});
    }
  }
  result.diagnostics = std::move(diagnostics_);
  return result;
}

}  // namespace internal

ParseResult parse(std::string_view text, std::string file_name) {
  return internal::Parser(text, std::move(file_name)).run();
}

Result<ir::Program> parse_program(std::string_view text, std::string file_name) {
  ParseResult result = parse(text, file_name);
  if (result.program) return std::move(*result.program);
  std::string message = format_diagnostics(file_name, text, result.diagnostics);
  if (!message.empty() && message.back() == '\n') message.pop_back();
  return invalid_argument_error(std::move(message));
}

}  // namespace kiln::lang
