#include "tools/npy.h"

#include <cctype>
#include <charconv>

#include "kiln/base/disk_cache.h"

namespace kiln::tools {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

const char* descr_of(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return "<f4";
    case ir::DType::kF64: return "<f8";
    default: return "<i4";
  }
}

// A tiny reader for the header: a Python dict literal with the three keys numpy writes.
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view text) : text_(text) {}
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool string(std::string* out) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool word(std::string* out) {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    *out = std::string(text_.substr(start, pos_ - start));
    return !out->empty();
  }
  bool integer(int64_t* out) {
    skip_space();
    const char* begin = text_.data() + pos_;
    auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), *out);
    if (error != std::errc() || *out < 0) return false;
    pos_ += static_cast<size_t>(end - begin);
    // numpy may write "3L" in old files.
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return true;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string describe(ir::DType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(ir::dtype_name(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<NpyArray> parse_npy(std::string_view bytes, std::string_view name) {
  const std::string where(name);
  auto bad = [&](const std::string& what) { return invalid_argument_error(where + ": " + what); };
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) {
    return bad("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return bad(".npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > bytes.size() - header_start) return bad("truncated header");
  HeaderReader header(bytes.substr(header_start, header_len));

  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  NpyArray array;
  if (!header.eat('{')) return bad("malformed header (expected a dict)");
  while (!header.eat('}')) {
    std::string key;
    if (!header.string(&key) || !header.eat(':')) return bad("malformed header");
    if (key == "descr") {
      if (!header.string(&descr)) return bad("malformed header: descr");
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string value;
      if (!header.word(&value) || (value != "True" && value != "False")) {
        return bad("malformed header: fortran_order");
      }
      fortran = value == "True";
      have_order = true;
    } else if (key == "shape") {
      if (!header.eat('(')) return bad("malformed header: shape");
      if (!header.eat(')')) {
        for (;;) {
          int64_t dim;
          if (!header.integer(&dim)) return bad("malformed header: shape");
          array.shape.push_back(dim);
          if (array.shape.size() > 64) return bad("more than 64 dimensions");
          if (header.eat(')')) break;
          if (!header.eat(',')) return bad("malformed header: shape");
          if (header.eat(')')) break;  // "(3,)"
        }
      }
      have_shape = true;
    } else {
      return bad("unexpected header key '" + key + "'");
    }
    header.eat(',');
  }
  if (!have_descr || !have_order || !have_shape) {
    return bad("header lacks descr, fortran_order or shape");
  }
  if (descr == "<f4" || descr == "=f4") array.dtype = ir::DType::kF32;
  else if (descr == "<f8" || descr == "=f8") array.dtype = ir::DType::kF64;
  else if (descr == "<i4" || descr == "=i4") array.dtype = ir::DType::kI32;
  else return bad("holds dtype '" + descr + "'; kiln reads only '<f4', '<f8' and '<i4'");
  if (fortran) return bad("holds a Fortran-order array; save it in C order (np.ascontiguousarray)");

  uint64_t count = 1;
  for (int64_t d : array.shape) {
    if (d != 0 && count > UINT64_MAX / static_cast<uint64_t>(d)) return bad("shape is too large");
    count *= static_cast<uint64_t>(d);
  }
  const size_t item = ir::dtype_size(array.dtype);
  const size_t data_start = header_start + header_len;
  const uint64_t available = bytes.size() - data_start;
  if (count > available / item || count * item != available) {
    return bad("holds " + describe(array.dtype, array.shape) + " but has " +
               std::to_string(available) + " data bytes instead of " +
               std::to_string(count * item));
  }
  array.data = std::string(bytes.substr(data_start));
  return array;
}

Result<NpyArray> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return parse_npy(bytes, path);
}

std::string format_npy(const NpyArray& array) {
  std::string dict = std::string("{'descr': '") + descr_of(array.dtype) +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    dict += std::to_string(array.shape[i]) + (array.shape.size() == 1 ? "," : (i + 1 < array.shape.size() ? ", " : ""));
  }
  dict += "), }";
  // Pad with spaces so that the data starts at a multiple of 64, ending the header with '\n'.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out += array.data;
  return out;
}

Status write_npy(const std::string& path, const NpyArray& array) {
  return write_file_atomic(path, format_npy(array));
}

}  // namespace kiln::tools
