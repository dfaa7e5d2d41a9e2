// The `.kiln` lexer: text → tokens, one at a time (the parser pulls them, so memory stays small
// whatever the input). Errors (unknown characters, malformed numbers, overlong lines) become a
// diagnostic and a kError token, after which the parser skips the rest of the line.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/statement.h"

namespace kiln::lang {

// The length of the valid UTF-8 sequence at s[0] (2 to 4 bytes), or 0 where none starts there.
size_t utf8_length(std::string_view s);

// Lines longer than this are refused (their diagnostic would be unreadable anyway).
inline constexpr size_t kMaxLineLength = 65536;

enum class TokenKind : uint8_t {
  kEnd,      // end of the text
  kNewline,  // ends a statement
  kIdent,    // names and keywords
  kNumber,
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace,
  kComma, kColon, kDot,
  kAt,  // @ before a memory mode
  kAssign, kPlusAssign, kMinusAssign, kStarAssign,  // = += -= *=
  kPlus, kMinus, kStar, kSlash,
  kLt, kLe, kGt, kGe, kEq, kNe,
  kAmp, kPipe, kCaret, kTilde, kShl, kShr,  // & | ^ ~ << >> (language version 3)
  kArrow,  // -> of a call statement
  kError,  // already reported
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;
  ir::SourceLoc loc;
  double number = 0;      // kNumber
  bool is_float = false;  // kNumber written with '.' or an exponent
};

// How a token reads in a message: "'x'", "'+='", "end of line", "end of file".
std::string describe(const Token& token);

class Lexer {
 public:
  Lexer(std::string_view text, std::vector<ir::Diagnostic>* diagnostics)
      : text_(text), diagnostics_(diagnostics) {}

  Token next();

 private:
  Token make(TokenKind kind, size_t start, size_t end) const;
  Token error(size_t start, size_t end, std::string message);
  Token number(size_t start);
  Token unknown(size_t start);
  ir::SourceLoc loc(size_t pos) const {
    return ir::SourceLoc{line_, static_cast<int>(pos - line_start_) + 1};
  }

  std::string_view text_;
  std::vector<ir::Diagnostic>* diagnostics_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  bool line_checked_ = false;  // the current line's length was checked
};

}  // namespace kiln::lang
