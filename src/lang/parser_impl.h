// The parser's state, shared by parser.cc (file structure, declarations, statements) and
// expr_parser.cc (expressions). Private to kiln_lang.
//
// Line structure: a newline ends a declaration or statement, except inside ( ) and [ ], where
// the statement goes on. After an error the parser skips to the end of the line; but if the
// offending token is the first of a line reached only because a bracket was still open, that
// bracket is reported as unclosed and parsing resumes at that token, as a new line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/call.h"
#include "kiln/lang/parser.h"
#include "lang/lexer.h"

namespace kiln::lang::internal {

// Every type's name, for "did you mean" (ir::dtype_list() is the same names as one string).
inline std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (ir::DType t : ir::kAllDTypes) names.emplace_back(ir::dtype_name(t));
  return names;
}

// A parsed expression and the depth of its tree.
struct PExpr {
  ir::RawExprRef expr;  // null after an error (already reported)
  int depth = 0;
  explicit operator bool() const { return expr != nullptr; }
};

class Parser {
 public:
  Parser(std::string_view text, std::string file_name);
  ParseResult run();

 private:
  // A statement waiting for completion, once every declaration is known.
  struct Pending {
    ir::RawStatement statement;
    std::optional<ir::RawCall> call;  // a call statement instead of `statement`
    size_t visible_nodes;  // nodes declared before it
    size_t visible_sizes;  // sizes declared before it
    int routine;           // index into routines_
  };

  // Tokens.
  void advance();
  const Token& peek();  // the token after cur_, read ahead (at the top level: no open brackets)
  bool at(TokenKind kind) const { return cur_.kind == kind; }
  bool at_word(std::string_view word) const { return cur_.kind == TokenKind::kIdent && cur_.text == word; }
  bool at_end_of_statement() const { return at(TokenKind::kNewline) || at(TokenKind::kEnd); }
  bool open();                                        // consumes ( or [
  bool close(TokenKind closer, const std::string& context);  // consumes ) or ], or reports
  void error(ir::SourceLoc loc, std::string message);
  bool unexpected(const std::string& expected);  // reports; returns false
  void recover();
  bool resume_here_ = false;  // recover() resumes at cur_: it starts a line after an unclosed bracket
  bool too_many_errors() const { return diagnostics_.size() >= kMaxDiagnostics; }

  // File structure (parser.cc).
  bool parse_declaration();
  bool parse_declaration_rest(ir::TensorNode* node, std::optional<ir::SourceLoc>* init_loc);
  bool parse_memory_mode(ir::TensorNode* node);  // an optional `@MODE` ending a declaration
  bool at_size_declaration();  // `size` followed by a name starts a line
  bool parse_size_declaration();
  bool parse_routine();
  bool parse_statement(int routine);
  bool parse_call(int routine);  // after `call`
  bool parse_bound(ir::RawStatement* statement);
  bool end_of_line();
  int routine_for_main();
  const ir::TensorNode* declared(std::string_view name) const;

  // Expressions (expr_parser.cc).
  // The binary operators' precedence levels (expr_parser.cc), `|` at 0 to `* /` at 6.
  static constexpr int kBinaryLevels = 7;
  static constexpr int kAdditiveLevel = 5;
  PExpr parse_expr();
  PExpr parse_additive();  // + - and tighter: dimensions, bounds, constant expressions
  PExpr parse_binary(int level);
  PExpr parse_unary();
  PExpr parse_primary();
  PExpr parse_call(const Token& name);
  bool parse_subscripts(std::vector<ir::RawExprRef>* out, int* depth);
  PExpr combine(ir::Op op, PExpr a, PExpr b, ir::SourceLoc loc);
  bool signed_number(double* value, const char* what);
  // An INIT's number or a const's value: a constant expression of numbers, earlier consts and
  // + - * / with parentheses (language version 2), evaluated here. Reports what is wrong and
  // returns false.
  bool constant_expression(double* value, const char* what);
  std::optional<double> constant_value(const ir::RawExpr& e);

  std::string_view text_;
  std::string file_name_;
  std::vector<ir::Diagnostic> diagnostics_;
  Lexer lexer_;
  Token cur_;
  std::optional<Token> peeked_;
  bool cur_starts_line_ = false;  // newlines inside brackets were skipped to reach cur_
  std::vector<Token> open_;       // the brackets open now, innermost last
  int nesting_ = 0;               // recursion depth of the expression parser

  std::vector<ir::SizeDecl> sizes_;
  std::vector<ir::TensorNode> nodes_;
  std::map<std::string, size_t, std::less<>> node_positions_;  // first node of each name
  std::vector<ir::Routine> routines_;
  std::map<std::string, ir::SourceLoc> block_names_;  // routine blocks seen
  std::vector<Pending> pending_;
  int main_routine_ = -1;        // routine of the top-level statements
  ir::SourceLoc main_block_loc_;  // of a `routine main` block, if any
  bool has_main_block_ = false;
};

}  // namespace kiln::lang::internal
