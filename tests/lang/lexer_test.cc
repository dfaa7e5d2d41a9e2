// The lexer: tokens, numbers, comments, and its errors.
#include "lang/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::lang {
namespace {

struct Lexed {
  std::vector<Token> tokens;
  std::vector<ir::Diagnostic> diagnostics;
};

Lexed lex(std::string_view text) {
  Lexed out;
  Lexer lexer(text, &out.diagnostics);
  for (int n = 0; n < 100000; ++n) {
    Token t = lexer.next();
    out.tokens.push_back(t);
    if (t.kind == TokenKind::kEnd) break;
  }
  return out;
}

std::vector<TokenKind> kinds(std::string_view text) {
  std::vector<TokenKind> out;
  for (const Token& t : lex(text).tokens) out.push_back(t.kind);
  return out;
}

using K = TokenKind;

TEST(Lexer, Punctuation) {
  EXPECT_EQ(kinds("( ) [ ] { } , : . = += -= *= + - * / < <= > >= == !="),
            (std::vector<K>{K::kLParen, K::kRParen, K::kLBracket, K::kRBracket, K::kLBrace,
                            K::kRBrace, K::kComma, K::kColon, K::kDot, K::kAssign, K::kPlusAssign,
                            K::kMinusAssign, K::kStarAssign, K::kPlus, K::kMinus, K::kStar,
                            K::kSlash, K::kLt, K::kLe, K::kGt, K::kGe, K::kEq, K::kNe, K::kEnd}));
  EXPECT_EQ(kinds("a--b"), (std::vector<K>{K::kIdent, K::kMinus, K::kMinus, K::kIdent, K::kEnd}));
  EXPECT_EQ(kinds("x.merge[i]"),
            (std::vector<K>{K::kIdent, K::kDot, K::kIdent, K::kLBracket, K::kIdent, K::kRBracket, K::kEnd}));
}

// Language version 3: bitwise operators and shifts, which do not change how `>`, `>=`, `<=` and
// `->` read; C's && and || are one error each.
TEST(Lexer, BitwiseOperatorsAndShifts) {
  EXPECT_EQ(kinds("& | ^ ~ << >>"), (std::vector<K>{K::kAmp, K::kPipe, K::kCaret, K::kTilde, K::kShl, K::kShr, K::kEnd}));
  EXPECT_EQ(kinds("a>>b>=c<<d<=e->f"), (std::vector<K>{K::kIdent, K::kShr, K::kIdent, K::kGe, K::kIdent, K::kShl,
                                                       K::kIdent, K::kLe, K::kIdent, K::kArrow, K::kIdent, K::kEnd}));
  EXPECT_EQ(kinds(">>= <<= > > ~~"), (std::vector<K>{K::kShr, K::kAssign, K::kShl, K::kAssign, K::kGt, K::kGt,
                                                     K::kTilde, K::kTilde, K::kEnd}));
  Lexed l = lex("a && b || c");
  ASSERT_EQ(l.diagnostics.size(), 2u);
  EXPECT_EQ(l.diagnostics[0].loc.column, 3);
  EXPECT_EQ(l.diagnostics[0].message, "'&&' is not an operator; write '&' (on bool values it is the logical and)");
  EXPECT_EQ(l.diagnostics[1].loc.column, 8);
  EXPECT_EQ(l.diagnostics[1].message, "'||' is not an operator; write '|' (on bool values it is the logical or)");
  EXPECT_EQ(kinds("a && b"), (std::vector<K>{K::kIdent, K::kError, K::kIdent, K::kEnd}));
}

TEST(Lexer, NewlinesCommentsAndLocations) {
  Lexed l = lex("a # comment, with $ and é\n\n  b_1\t= 2 # more\r\nc");
  ASSERT_TRUE(l.diagnostics.empty());
  std::vector<K> expected = {K::kIdent, K::kNewline, K::kNewline, K::kIdent, K::kAssign, K::kNumber,
                             K::kNewline, K::kIdent, K::kEnd};
  ASSERT_EQ(l.tokens.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(l.tokens[i].kind, expected[i]) << i;
  EXPECT_EQ(l.tokens[3].text, "b_1");
  EXPECT_EQ(l.tokens[3].loc.line, 3);
  EXPECT_EQ(l.tokens[3].loc.column, 3);
  EXPECT_EQ(l.tokens[4].loc.column, 7);  // a tab is one column
  EXPECT_EQ(l.tokens[7].loc.line, 4);
  EXPECT_EQ(l.tokens[7].loc.column, 1);
}

TEST(Lexer, Numbers) {
  struct Case {
    const char* text;
    double value;
    bool is_float;
  };
  for (const Case& c : {Case{"3", 3, false}, Case{"0.5", 0.5, true}, Case{"1e-3", 1e-3, true},
                        Case{"2.5E+2", 250, true}, Case{"007", 7, false}, Case{".5", 0.5, true},
                        Case{"5.", 5, true}, Case{"1e5", 1e5, true},
                        Case{"123456789012345678901234567890", 1.2345678901234568e29, false}}) {
    Lexed l = lex(c.text);
    ASSERT_TRUE(l.diagnostics.empty()) << c.text;
    ASSERT_EQ(l.tokens[0].kind, K::kNumber) << c.text;
    EXPECT_EQ(l.tokens[0].number, c.value) << c.text;
    EXPECT_EQ(l.tokens[0].is_float, c.is_float) << c.text;
    EXPECT_EQ(l.tokens[1].kind, K::kEnd) << c.text;
  }
}

TEST(Lexer, MalformedNumbers) {
  for (const char* text : {"1e", "1e+", "3abc", "1.2.3", "0x10", "2_000", "1.5f"}) {
    Lexed l = lex(std::string("y = ") + text + " + 1");
    ASSERT_EQ(l.diagnostics.size(), 1u) << text;
    EXPECT_EQ(l.diagnostics[0].loc.column, 5) << text;
    EXPECT_EQ(l.diagnostics[0].message,
              "malformed number '" + std::string(text) + "'; numbers look like 3, 0.5, 1e-3 or 2.5E+2");
    EXPECT_EQ(l.tokens[2].kind, K::kError);
    EXPECT_EQ(l.tokens[3].kind, K::kPlus) << text;  // lexing goes on after the bad number
  }
  Lexed l = lex("1e999");
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].message, "number '1e999' is out of the range of a 64-bit float");
}

TEST(Lexer, UnknownCharacters) {
  Lexed l = lex("a $ b ! c \"s\" \x01 \xff é");
  std::vector<std::string> messages;
  for (const ir::Diagnostic& d : l.diagnostics) messages.push_back(std::to_string(d.loc.column) + ": " + d.message);
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "3: unexpected character '$'; remove it",
                          "7: unexpected character '!'; did you mean '!='? (the logical not of a bool is '~')",
                          "11: unexpected character '\"'; the language has no strings",
                          "13: unexpected character '\"'; the language has no strings",
                          "15: unexpected byte 0x01; remove it",
                          "17: unexpected byte 0xff; remove it",
                          "19: unexpected character 'é'; names, numbers and operators are ASCII (only comments may hold other characters)",
                      }));
}

TEST(Lexer, OverlongLine) {
  std::string text = "a = 1\n" + std::string(kMaxLineLength + 10, 'x') + "\nb";
  Lexed l = lex(text);
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].loc.line, 2);
  EXPECT_EQ(l.diagnostics[0].loc.column, static_cast<int>(kMaxLineLength) + 1);
  EXPECT_NE(l.diagnostics[0].message.find("line is longer than 65536 characters"), std::string::npos);
  ASSERT_GE(l.tokens.size(), 7u);
  EXPECT_EQ(l.tokens[4].kind, K::kError);
  EXPECT_EQ(l.tokens[5].kind, K::kNewline);
  EXPECT_EQ(l.tokens[6].text, "b");
  // A line of exactly the limit is fine.
  EXPECT_TRUE(lex(std::string(kMaxLineLength, 'x')).diagnostics.empty());
}

TEST(Lexer, Describe) {
  Lexed l = lex("abc\n");
  EXPECT_EQ(describe(l.tokens[0]), "'abc'");
  EXPECT_EQ(describe(l.tokens[1]), "end of line");
  EXPECT_EQ(describe(l.tokens[2]), "end of file");
}

}  // namespace
}  // namespace kiln::lang
