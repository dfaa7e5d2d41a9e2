// The `.kiln` lexer (lexer.h).
#include "lang/lexer.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace kiln::lang {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

}  // namespace

size_t utf8_length(std::string_view s) {
  if (s.empty()) return 0;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  return n;
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of file";
    case TokenKind::kNewline: return "end of line";
    default: {
      std::string_view text = token.text;
      if (text.size() > 40) return "'" + std::string(text.substr(0, 37)) + "...'";
      return "'" + std::string(text) + "'";
    }
  }
}

Token Lexer::make(TokenKind kind, size_t start, size_t end) const {
  Token t;
  t.kind = kind;
  t.text = text_.substr(start, end - start);
  t.loc = loc(start);
  return t;
}

Token Lexer::error(size_t start, size_t end, std::string message) {
  diagnostics_->push_back(ir::Diagnostic{loc(start), std::move(message)});
  Token t = make(TokenKind::kError, start, end);
  pos_ = end;
  return t;
}

Token Lexer::number(size_t start) {
  size_t p = start;
  bool is_float = false;
  bool bad = false;
  while (p < text_.size() && is_digit(text_[p])) ++p;
  if (p < text_.size() && text_[p] == '.') {
    is_float = true;
    ++p;
    while (p < text_.size() && is_digit(text_[p])) ++p;
  }
  if (p < text_.size() && (text_[p] == 'e' || text_[p] == 'E')) {
    is_float = true;
    size_t q = p + 1;
    if (q < text_.size() && (text_[q] == '+' || text_[q] == '-')) ++q;
    if (q < text_.size() && is_digit(text_[q])) {
      while (q < text_.size() && is_digit(text_[q])) ++q;
    } else {
      bad = true;  // an exponent without digits
    }
    p = q;
  }
  // A number runs straight into letters, digits or another '.': `3abc`, `1.2.3`, `0x10`.
  if (p < text_.size() && (is_alnum(text_[p]) || text_[p] == '.')) bad = true;
  if (bad) {
    while (p < text_.size() && (is_alnum(text_[p]) || text_[p] == '.')) ++p;
    std::string text(text_.substr(start, p - start));
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return error(start, p,
                 "malformed number '" + text + "'; numbers look like 3, 0.5, 1e-3 or 2.5E+2");
  }
  std::string_view digits = text_.substr(start, p - start);
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(value)) {
    std::string text(digits.size() > 40 ? std::string(digits.substr(0, 37)) + "..." : std::string(digits));
    return error(start, p, "number '" + text + "' is out of the range of a 64-bit float");
  }
  Token t = make(TokenKind::kNumber, start, p);
  t.number = value;
  t.is_float = is_float;
  pos_ = p;
  return t;
}

Token Lexer::unknown(size_t start) {
  unsigned char c = static_cast<unsigned char>(text_[start]);
  if (c >= 0x80) {
    size_t n = utf8_length(text_.substr(start));
    if (n > 0) {
      return error(start, start + n,
                   "unexpected character '" + std::string(text_.substr(start, n)) +
                       "'; names, numbers and operators are ASCII (only comments may hold other "
                       "characters)");
    }
  }
  if (c < 0x20 || c >= 0x7F) {
    static const char kHex[] = "0123456789abcdef";
    std::string hex = {kHex[c >> 4], kHex[c & 15]};
    return error(start, start + 1, "unexpected byte 0x" + hex + "; remove it");
  }
  std::string message = "unexpected character '" + std::string(1, static_cast<char>(c)) + "'";
  if (c == '!') message += "; did you mean '!='? (the logical not of a bool is '~')";
  else if (c == '"' || c == '\'') message += "; the language has no strings";
  else message += "; remove it";
  return error(start, start + 1, message);
}

Token Lexer::next() {
  for (;;) {
    if (!line_checked_) {
      line_checked_ = true;
      size_t end = text_.find('\n', line_start_);
      if (end == std::string_view::npos) end = text_.size();
      if (end - line_start_ > kMaxLineLength) {
        pos_ = line_start_ + kMaxLineLength;
        return error(pos_, end,
                     "line is longer than " + std::to_string(kMaxLineLength) +
                         " characters; split it (statements continue on the next line inside "
                         "brackets)");
      }
    }
    if (pos_ >= text_.size()) return make(TokenKind::kEnd, text_.size(), text_.size());
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++pos_;
      continue;
    }
    if (c == '#') {
      size_t end = text_.find('\n', pos_);
      pos_ = end == std::string_view::npos ? text_.size() : end;
      continue;
    }
    break;
  }
  const size_t start = pos_;
  const char c = text_[start];
  const char c1 = start + 1 < text_.size() ? text_[start + 1] : '\0';
  if (c == '\n') {
    Token t = make(TokenKind::kNewline, start, start + 1);
    pos_ = start + 1;
    ++line_;
    line_start_ = pos_;
    line_checked_ = false;
    return t;
  }
  if (is_alpha(c)) {
    size_t p = start;
    while (p < text_.size() && is_alnum(text_[p])) ++p;
    pos_ = p;
    return make(TokenKind::kIdent, start, p);
  }
  if (is_digit(c) || (c == '.' && is_digit(c1))) return number(start);

  auto op = [&](TokenKind kind, size_t length) {
    pos_ = start + length;
    return make(kind, start, start + length);
  };
  switch (c) {
    case '(': return op(TokenKind::kLParen, 1);
    case ')': return op(TokenKind::kRParen, 1);
    case '[': return op(TokenKind::kLBracket, 1);
    case ']': return op(TokenKind::kRBracket, 1);
    case '{': return op(TokenKind::kLBrace, 1);
    case '}': return op(TokenKind::kRBrace, 1);
    case ',': return op(TokenKind::kComma, 1);
    case ':': return op(TokenKind::kColon, 1);
    case '.': return op(TokenKind::kDot, 1);
    case '@': return op(TokenKind::kAt, 1);
    case '/': return op(TokenKind::kSlash, 1);
    case '=': return c1 == '=' ? op(TokenKind::kEq, 2) : op(TokenKind::kAssign, 1);
    case '+': return c1 == '=' ? op(TokenKind::kPlusAssign, 2) : op(TokenKind::kPlus, 1);
    case '-': return c1 == '=' ? op(TokenKind::kMinusAssign, 2)
                     : c1 == '>' ? op(TokenKind::kArrow, 2)
                                 : op(TokenKind::kMinus, 1);
    case '*': return c1 == '=' ? op(TokenKind::kStarAssign, 2) : op(TokenKind::kStar, 1);
    case '<': return c1 == '=' ? op(TokenKind::kLe, 2) : c1 == '<' ? op(TokenKind::kShl, 2) : op(TokenKind::kLt, 1);
    case '>': return c1 == '=' ? op(TokenKind::kGe, 2) : c1 == '>' ? op(TokenKind::kShr, 2) : op(TokenKind::kGt, 1);
    case '^': return op(TokenKind::kCaret, 1);
    case '~': return op(TokenKind::kTilde, 1);
    // C's && and || would otherwise read as two operators, with a puzzling error at the second.
    case '&':
      if (c1 == '&') return error(start, start + 2, "'&&' is not an operator; write '&' (on bool values it is the logical and)");
      return op(TokenKind::kAmp, 1);
    case '|':
      if (c1 == '|') return error(start, start + 2, "'||' is not an operator; write '|' (on bool values it is the logical or)");
      return op(TokenKind::kPipe, 1);
    case '!':
      if (c1 == '=') return op(TokenKind::kNe, 2);
      break;
    default:
      break;
  }
  return unknown(start);
}

}  // namespace kiln::lang
