// The round trip of a valid program through text, for the language's tests: parse(print(p)) is p
// (structurally, types included) and print(parse(print(p))) == print(p).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ir/program_equal.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"

namespace kiln::lang::testing {

// Checks the round trip of `p`; returns its printed text.
inline std::string check_round_trip(const ir::Program& p, const std::string& what) {
  std::string printed = ir::print_program(p);
  ParseResult again = parse(printed, "printed.kiln");
  EXPECT_TRUE(again.program.has_value())
      << what << "\n" << printed << format_diagnostics("printed.kiln", printed, again.diagnostics);
  if (!again.program) return printed;
  EXPECT_TRUE(ir::testing::programs_equal(p, *again.program)) << what << "\n" << printed;
  EXPECT_EQ(ir::print_program(*again.program), printed) << what;
  return printed;
}

}  // namespace kiln::lang::testing
