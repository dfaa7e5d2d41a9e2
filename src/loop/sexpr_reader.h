// The loop IR's text form, reading: s-expressions (atoms, strings, lists) with their line and
// column, read without recursion and to a bounded depth, so no input can crash the reader. The
// kernel is built from them by loop_parse.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::ir::loop_text {

inline constexpr int kMaxDepth = 1000;  // nesting of parentheses

struct SNode {
  enum class Kind : uint8_t { kAtom, kString, kList };
  Kind kind = Kind::kAtom;
  std::string text;  // an atom's text, a string's decoded bytes
  int line = 0, column = 0;
  int end_line = 0, end_column = 0;  // a list's ')'
  std::vector<SNode> items;
};

Status error_at(int line, int column, const std::string& message);
Status error_at(const SNode& node, const std::string& message);
// Text quoted for an error message: escaped and shortened.
std::string quoted(std::string_view text);
// What a datum is, for an error message: the atom quoted, "a string", "a list '(head ...)'".
std::string describe(const SNode& node);

// Reads the top-level data of a text one by one.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  // The next top-level datum, or nullopt at the end of the text.
  Result<std::optional<SNode>> next();

 private:
  static bool is_space(char c);
  static bool is_delimiter(char c);
  void advance();
  void skip_blank();
  static int hex_digit(char c);
  Status read_string(SNode* slot);

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

}  // namespace kiln::ir::loop_text
