// Prints a Program in the `.kiln` language itself: declarations, then the statements of routine
// `main` as top-level statements (when it is the first routine and not empty), then every other
// routine as a `routine NAME { ... }` block. For any program made by the parser or
// ProgramBuilder, parsing the text gives the same program again (memory modes and source
// locations aside, which the language does not express): print(parse(print(p))) == print(p).
//
// Numbers print so that they read back exactly (shortest round-trip form); a float-typed literal
// always has a '.' or an exponent, an integer-typed one never does, so literals keep their types
// when parsed again; bool literals print as `true` and `false`. Parentheses appear only where precedence needs them. Indices that never stand
// alone as a whole subscript get their extent back as a `where` bound.
//
// The printer never fails: malformed parts of a hand-made Program print as `<...>` markers.
#pragma once

#include <string>

#include "kiln/ir/program.h"

namespace kiln::ir {

std::string print_program(const Program& program);

// One declaration line: `input  x : f32[4, 8]`, `const  lr : f32 = 0.1`, `tensor h : f32[8] @local`.
std::string print_declaration(const TensorNode& node, const std::vector<SizeDecl>& sizes = {});
// A node's dimensions as declared: "[4, 8]", "[N, 2*N + 1]" ("[]" for a scalar).
std::string dims_text(const TensorNode& node, const std::vector<SizeDecl>& sizes = {});

// One statement without indentation or newline: `y[i, j] = sum(a[i, k] * b[k, j])`.
std::string print_statement(const Program& program, const Assignment& statement);
// `call NAME(ARGS) -> OUTPUTS`, attributes as written (defaults are not added).
std::string print_call(const Program& program, const Call& call);

// An expression of `statement` (for messages and tests).
std::string print_expr(const Program& program, const Assignment& statement, const Expr& expr);

// The shortest text that reads back as exactly `value`: "3", "0.1", "1e+20". With as_float, the
// text always has a '.' or an exponent ("3.0"). Non-finite values print as "inf", "-inf", "nan".
std::string format_number(double value, bool as_float);

}  // namespace kiln::ir
