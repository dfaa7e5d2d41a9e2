// Reading the s-expressions of the loop IR's text form (sexpr_reader.h).
#include "loop/sexpr_reader.h"

#include "loop/loop_text_internal.h"

namespace kiln::ir::loop_text {

Status error_at(int line, int column, const std::string& message) {
  return invalid_argument_error(std::to_string(line) + ":" + std::to_string(column) + ": " +
                                message);
}

Status error_at(const SNode& node, const std::string& message) {
  return error_at(node.line, node.column, message);
}

std::string quoted(std::string_view text) {
  std::string out = "'";
  std::string escaped;
  append_escaped(escaped, text.substr(0, 40));
  out += escaped;
  if (text.size() > 40) out += "...";
  out += "'";
  return out;
}

std::string describe(const SNode& node) {
  switch (node.kind) {
    case SNode::Kind::kAtom: return quoted(node.text);
    case SNode::Kind::kString: return "a string";
    case SNode::Kind::kList:
      if (!node.items.empty() && node.items[0].kind == SNode::Kind::kAtom) {
        return "a list '(" + node.items[0].text.substr(0, 40) + " ...)'";
      }
      return "a list";
  }
  return "?";
}

// The next top-level datum, or nullopt at the end of the text.
Result<std::optional<SNode>> Reader::next() {
  skip_blank();
  if (pos_ >= text_.size()) return std::optional<SNode>();
  SNode root;
  std::vector<SNode*> open;  // the lists being read, innermost last
  for (;;) {
    skip_blank();
    if (pos_ >= text_.size()) {
      const SNode& unclosed = *open.back();
      return error_at(line_, column_,
                      "unexpected end of text: expected ')' to close the '(' at " +
                          std::to_string(unclosed.line) + ":" + std::to_string(unclosed.column));
    }
    char c = text_[pos_];
    if (c == ')') {
      if (open.empty()) return error_at(line_, column_, "unexpected ')'");
      open.back()->end_line = line_;
      open.back()->end_column = column_;
      advance();
      open.pop_back();
      if (open.empty()) return std::optional<SNode>(std::move(root));
      continue;
    }
    SNode* slot;
    if (open.empty()) {
      slot = &root;
    } else {
      open.back()->items.emplace_back();
      slot = &open.back()->items.back();
    }
    slot->line = line_;
    slot->column = column_;
    if (c == '(') {
      if (static_cast<int>(open.size()) >= kMaxDepth) {
        return error_at(line_, column_,
                        "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      }
      advance();
      slot->kind = SNode::Kind::kList;
      open.push_back(slot);
      continue;
    }
    if (c == '"') {
      KILN_RETURN_IF_ERROR(read_string(slot));
    } else {
      slot->kind = SNode::Kind::kAtom;
      size_t start = pos_;
      while (pos_ < text_.size() && !is_delimiter(text_[pos_])) advance();
      slot->text = std::string(text_.substr(start, pos_ - start));
    }
    if (open.empty()) return std::optional<SNode>(std::move(root));
  }
}

bool Reader::is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool Reader::is_delimiter(char c) {
  return is_space(c) || c == '(' || c == ')' || c == '"' || c == ';';
}

void Reader::advance() {
  if (text_[pos_] == '\n') {
    ++line_;
    column_ = 1;
  } else {
    ++column_;
  }
  ++pos_;
}

void Reader::skip_blank() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (is_space(c)) {
      advance();
    } else if (c == ';') {
      while (pos_ < text_.size() && text_[pos_] != '\n') advance();
    } else {
      return;
    }
  }
}

int Reader::hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status Reader::read_string(SNode* slot) {
  slot->kind = SNode::Kind::kString;
  const int line = line_, column = column_;
  advance();  // the opening quote
  for (;;) {
    if (pos_ >= text_.size()) {
      return error_at(line, column, "unterminated string: expected a closing '\"'");
    }
    char c = text_[pos_];
    if (c == '"') {
      advance();
      return Status();
    }
    if (c != '\\') {
      slot->text += c;
      advance();
      continue;
    }
    const int escape_line = line_, escape_column = column_;
    advance();
    if (pos_ >= text_.size()) {
      return error_at(line, column, "unterminated string: expected a closing '\"'");
    }
    char e = text_[pos_];
    switch (e) {
      case '"': slot->text += '"'; break;
      case '\\': slot->text += '\\'; break;
      case 'n': slot->text += '\n'; break;
      case 't': slot->text += '\t'; break;
      case 'r': slot->text += '\r'; break;
      case 'x': {
        int hi = pos_ + 1 < text_.size() ? hex_digit(text_[pos_ + 1]) : -1;
        int lo = pos_ + 2 < text_.size() ? hex_digit(text_[pos_ + 2]) : -1;
        if (hi < 0 || lo < 0) {
          return error_at(escape_line, escape_column,
                          "expected two hexadecimal digits after '\\x'");
        }
        slot->text += static_cast<char>(hi * 16 + lo);
        advance();
        advance();
        break;
      }
      default:
        return error_at(escape_line, escape_column,
                        "unknown escape " + quoted(std::string("\\") + e) +
                            " (expected \\\" \\\\ \\n \\t \\r or \\xHH)");
    }
    advance();
  }
}

}  // namespace kiln::ir::loop_text
