// Formatting of diagnostics: FILE:LINE:COLUMN: error: MESSAGE, the line, a caret.
#include "kiln/lang/diagnostics.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

Diagnostic at(int line, int column, std::string message) {
  return Diagnostic{ir::SourceLoc{line, column}, std::move(message)};
}

TEST(Diagnostics, Format) {
  std::string text = "input x : f32\ny = x $ 2\n";
  EXPECT_EQ(format_diagnostic("p.kiln", text, at(2, 7, "unexpected character '$'")),
            "p.kiln:2:7: error: unexpected character '$'\n"
            "y = x $ 2\n"
            "      ^\n");
  EXPECT_EQ(format_diagnostic("p.kiln", text, at(1, 1, "first")),
            "p.kiln:1:1: error: first\n"
            "input x : f32\n"
            "^\n");
}

TEST(Diagnostics, SeveralInOrder) {
  std::string text = "a\nb\n";
  EXPECT_EQ(format_diagnostics("f", text, {at(1, 1, "one"), at(2, 2, "two")}),
            "f:1:1: error: one\na\n^\n"
            "f:2:2: error: two\nb\n ^\n");
  EXPECT_EQ(format_diagnostics("f", text, {}), "");
}

TEST(Diagnostics, TabsKeepTheCaretAligned) {
  std::string text = "\ty =\t$\n";
  EXPECT_EQ(format_diagnostic("t", text, at(1, 6, "here")),
            "t:1:6: error: here\n"
            "\ty =\t$\n"
            "\t   \t^\n");
}

TEST(Diagnostics, NonAsciiAndControlBytes) {
  // é is two bytes but one character: the caret stays under the '$'.
  std::string text = "# é\x01\xff $\n";
  EXPECT_EQ(format_diagnostic("u", text, at(1, 8, "here")),
            "u:1:8: error: here\n"
            "# é?? $\n"
            "      ^\n");
}

TEST(Diagnostics, CarriageReturnsAndEndOfLine) {
  std::string text = "y = 1 +\r\nz\r\n";
  EXPECT_EQ(format_diagnostic("c", text, at(1, 8, "expected an expression")),
            "c:1:8: error: expected an expression\n"
            "y = 1 +\n"
            "       ^\n");
  // A column past the end of the line points just after it.
  EXPECT_EQ(format_diagnostic("c", "ab", at(1, 40, "x")), "c:1:40: error: x\nab\n  ^\n");
}

TEST(Diagnostics, WithoutASourceLine) {
  EXPECT_EQ(format_diagnostic("<builder>", "", at(0, 0, "built")), "<builder>: error: built\n");
  EXPECT_EQ(format_diagnostic("f", "one line", at(5, 2, "beyond")), "f:5:2: error: beyond\n");
}

TEST(Diagnostics, LongLinesAreCutAroundTheColumn) {
  std::string text = std::string(300, 'a') + "$" + std::string(300, 'b');
  std::string out = format_diagnostic("l", text, at(1, 301, "here"));
  std::string expected_quote = "..." + std::string(80, 'a') + "$" + std::string(79, 'b') + "...";
  EXPECT_EQ(out, "l:1:301: error: here\n" + expected_quote + "\n" + std::string(83, ' ') + "^\n");
}

TEST(Diagnostics, ParseErrorsFormatAsTheCliSays) {
  std::string text =
      "input x : f32[4]\n"
      "output y : f32[4]\n"
      "y[i] = x[i, j]\n";
  ParseResult r = parse(text, "prog.kiln");
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(format_diagnostics("prog.kiln", text, r.diagnostics),
            "prog.kiln:3:8: error: 'x' has 1 dimension but 2 subscripts are given; write exactly "
            "one subscript per dimension\n"
            "y[i] = x[i, j]\n"
            "       ^\n");
}

}  // namespace
}  // namespace kiln::lang
