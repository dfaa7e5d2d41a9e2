// The `.kiln` parser: text → ir::Program (the language is docs/language.md).
//
// A newline ends a declaration or statement, except inside ( ) and [ ], where the statement goes
// on to the next line. Top-level statements form routine `main`, which comes first.
//
// Every error in the text is reported, each with its line and column (the parser skips to the
// end of the line after an error and goes on). Statements are completed and checked by
// ir::complete_statement(), exactly as ProgramBuilder's are. Nothing the text can hold makes the
// parser crash, hang or use memory out of proportion to the text: lines are at most
// kMaxLineLength bytes, expressions at most ir::kMaxExprDepth deep, and after kMaxDiagnostics
// errors it stops.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/ir/statement.h"

namespace kiln::lang {

using ir::Diagnostic;

// After this many errors the parser stops (and says so in one more diagnostic).
inline constexpr size_t kMaxDiagnostics = 100;

struct ParseResult {
  std::optional<ir::Program> program;    // present exactly when there are no diagnostics
  std::vector<Diagnostic> diagnostics;   // errors, in source order
};

// Parses a whole file. `file_name` goes into Program::file and into formatted diagnostics.
ParseResult parse(std::string_view text, std::string file_name);

// The program, or INVALID_ARGUMENT whose message is format_diagnostics() of every error (without
// the final newline).
Result<ir::Program> parse_program(std::string_view text, std::string file_name);

}  // namespace kiln::lang
