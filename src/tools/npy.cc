#include "tools/npy.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

namespace kiln::tools {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// The descr kiln writes for each type: NumPy's for its dtype of the same name, `'<V2'` for bf16
// (what NumPy writes for an ml_dtypes.bfloat16 array).
const char* descr_of(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kBool: return "|b1";
    case ir::DType::kI8: return "|i1";
    case ir::DType::kU8: return "|u1";
    case ir::DType::kI16: return "<i2";
    case ir::DType::kU16: return "<u2";
    case ir::DType::kI32: return "<i4";
    case ir::DType::kU32: return "<u4";
    case ir::DType::kI64: return "<i8";
    case ir::DType::kU64: return "<u8";
    case ir::DType::kF16: return "<f2";
    case ir::DType::kBF16: return "<V2";
    case ir::DType::kF32: return "<f4";
    case ir::DType::kF64: return "<f8";
  }
  return "?";
}

// The type of a descr: a byte order ('<', '|', or '=', which is little-endian on every host kiln
// runs on; for one-byte types any), a kind and a size. nullopt for anything else, with `why` set
// when the reason is the byte order.
std::optional<ir::DType> dtype_of_descr(const std::string& descr, std::string* why) {
  if (descr.size() < 3) return std::nullopt;
  const char order = descr[0];
  const std::string body = descr.substr(1);
  static constexpr std::pair<std::string_view, ir::DType> kBodies[] = {
      {"b1", ir::DType::kBool}, {"i1", ir::DType::kI8},  {"u1", ir::DType::kU8},   {"i2", ir::DType::kI16},
      {"u2", ir::DType::kU16},  {"i4", ir::DType::kI32}, {"u4", ir::DType::kU32},  {"i8", ir::DType::kI64},
      {"u8", ir::DType::kU64},  {"f2", ir::DType::kF16}, {"V2", ir::DType::kBF16}, {"f4", ir::DType::kF32},
      {"f8", ir::DType::kF64},
  };
  for (const auto& [text, type] : kBodies) {
    if (body != text) continue;
    if (order == '<' || order == '=' || order == '|' || (order == '>' && ir::dtype_size(type) == 1)) return type;
    if (order == '>') {
      *why = "holds dtype '" + descr + "' (big-endian); kiln reads little-endian files: save the array as '<" + body +
             "' (a.astype(a.dtype.newbyteorder('<')))";
    }
    return std::nullopt;
  }
  return std::nullopt;
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
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
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

bool npy_holds(ir::DType file, ir::DType declared) {
  return file == declared || (file == ir::DType::kU16 && declared == ir::DType::kBF16);
}

Status check_npy_bools(std::span<const std::byte> data, std::string_view name) {
  for (size_t i = 0; i < data.size(); ++i) {
    const auto byte = static_cast<unsigned>(data[i]);
    if (byte > 1) {
      return invalid_argument_error(std::string(name) + ": element " + std::to_string(i) + " of the bool array is " +
                                    std::to_string(byte) + "; a bool is 0 (false) or 1 (true)");
    }
  }
  return Status();
}

std::string describe(ir::DType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(ir::dtype_name(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// The magic, the version and the header's length come first: 10 bytes (version 1) or 12.
constexpr size_t kPreambleBytes = 12;

struct Preamble {
  size_t header_start = 0;
  size_t header_len = 0;
};

Status bad_npy(const std::string& where, const std::string& what) {
  return invalid_argument_error(where + ": " + what);
}

// `bytes`: the file's first kPreambleBytes (fewer if it is shorter).
Result<Preamble> parse_preamble(std::string_view bytes, const std::string& where) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) {
    return bad_npy(where, "not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  Preamble p;
  if (minor != 0 && major >= 1 && major <= 3) {
    return bad_npy(where, ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                              " is not supported (NumPy writes 1.0, 2.0 and 3.0)");
  }
  if (major == 1) {
    p.header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    p.header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad_npy(where, "truncated header");
    for (int i = 0; i < 4; ++i) p.header_len |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    p.header_start = 12;
  } else {
    return bad_npy(where, ".npy format version " + std::to_string(major) + " is not supported");
  }
  if (p.header_len > kMaxNpyHeaderBytes) {
    return bad_npy(where, "the header is " + std::to_string(p.header_len) + " bytes long; kiln reads headers of at most " +
                              std::to_string(kMaxNpyHeaderBytes) + " bytes");
  }
  return p;
}

// The header dict (a Python literal with the three keys numpy writes).
Result<NpyHeader> parse_header(std::string_view text, const Preamble& preamble, const std::string& where) {
  auto bad = [&](const std::string& what) { return bad_npy(where, what); };
  HeaderReader header(text);
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  NpyHeader out;
  // What NumPy's parser (ast.literal_eval) refuses: control bytes other than whitespace, and bytes
  // outside ASCII (every header NumPy writes is ASCII).
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c >= 0x7f) {
      return bad("malformed header (byte " + std::to_string(c) + " in its text)");
    }
  }
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
          out.shape.push_back(dim);
          if (out.shape.size() > 64) return bad("more than 64 dimensions");
          if (header.eat(')')) break;
          if (!header.eat(',')) return bad("malformed header: shape");
          if (header.eat(')')) break;  // "(3,)"
        }
      }
      have_shape = true;
    } else {
      return bad("unexpected header key '" + key + "'");
    }
    // Entries are separated by commas (a trailing one is allowed), as in a Python dict.
    if (!header.eat(',') && !header.peek('}')) return bad("malformed header (expected ',' or '}' after " + key + ")");
  }
  if (!header.at_end()) return bad("malformed header (text after the dict)");
  if (!have_descr || !have_order || !have_shape) {
    return bad("header lacks descr, fortran_order or shape");
  }
  std::string why;
  if (std::optional<ir::DType> type = dtype_of_descr(descr, &why)) {
    out.dtype = *type;
  } else {
    if (!why.empty()) return bad(why);
    return bad("holds dtype '" + descr + "'; kiln reads '|b1' (bool), '|i1', '|u1', '<i2', '<u2', '<i4', '<u4', "
               "'<i8', '<u8', '<f2' (f16), '<V2' (bf16, as ml_dtypes writes it), '<f4' and '<f8'");
  }
  if (fortran) return bad("holds a Fortran-order array; save it in C order (np.ascontiguousarray)");

  uint64_t count = 1;
  for (int64_t d : out.shape) {
    if (d != 0 && count > UINT64_MAX / static_cast<uint64_t>(d)) return bad("shape is too large");
    count *= static_cast<uint64_t>(d);
  }
  const size_t item = ir::dtype_size(out.dtype);
  if (count > UINT64_MAX / item) return bad("shape is too large");
  out.data_bytes = count * item;
  out.data_offset = preamble.header_start + preamble.header_len;
  return out;
}

Status wrong_data_size(const std::string& where, const NpyHeader& header, const std::string& available) {
  return bad_npy(where, "holds " + describe(header.dtype, header.shape) + " but has " + available +
                            " data bytes instead of " + std::to_string(header.data_bytes));
}

}  // namespace

Result<NpyArray> parse_npy(std::string_view bytes, std::string_view name) {
  const std::string where(name);
  KILN_ASSIGN_OR_RETURN(Preamble preamble, parse_preamble(bytes.substr(0, kPreambleBytes), where));
  if (preamble.header_len > bytes.size() - preamble.header_start) return bad_npy(where, "truncated header");
  KILN_ASSIGN_OR_RETURN(NpyHeader header,
                        parse_header(bytes.substr(preamble.header_start, preamble.header_len), preamble, where));
  const uint64_t available = bytes.size() - header.data_offset;
  if (available != header.data_bytes) return wrong_data_size(where, header, std::to_string(available));
  return NpyArray{header.dtype, std::move(header.shape), std::string(bytes.substr(header.data_offset))};
}

Result<NpyReader> NpyReader::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  KILN_ASSIGN_OR_RETURN(std::string head, file.read(kPreambleBytes));
  KILN_ASSIGN_OR_RETURN(Preamble preamble, parse_preamble(head, path));
  const size_t header_end = preamble.header_start + preamble.header_len;
  if (head.size() < header_end) {
    KILN_ASSIGN_OR_RETURN(std::string rest, file.read(header_end - head.size()));
    head += rest;
    if (head.size() < header_end) return bad_npy(path, "truncated header");
  }
  KILN_ASSIGN_OR_RETURN(NpyHeader header,
                        parse_header(std::string_view(head).substr(preamble.header_start, preamble.header_len),
                                     preamble, path));
  return NpyReader(std::move(file), std::move(header), head.substr(header_end));
}

Status NpyReader::check_file_size() const {
  if (std::optional<uint64_t> size = file_.regular_size()) {
    // A regular file's size is known: refuse a wrong one before reading anything.
    if (*size < header_.data_offset || *size - header_.data_offset != header_.data_bytes) {
      const uint64_t available = *size < header_.data_offset ? 0 : *size - header_.data_offset;
      return wrong_data_size(file_.path(), header_, std::to_string(available));
    }
  }
  if (header_.data_bytes > SIZE_MAX) return wrong_data_size(file_.path(), header_, "fewer");
  if (first_data_.size() > header_.data_bytes) return wrong_data_size(file_.path(), header_, "more");
  return Status();
}

Status NpyReader::check_read(uint64_t got) {
  if (got != header_.data_bytes) return wrong_data_size(file_.path(), header_, "only " + std::to_string(got));
  KILN_ASSIGN_OR_RETURN(bool at_end, file_.at_end());
  if (!at_end) return wrong_data_size(file_.path(), header_, "more than " + std::to_string(header_.data_bytes));
  return Status();
}

Result<std::string> NpyReader::read_data() {
  KILN_RETURN_IF_ERROR(check_file_size());
  std::string data = std::move(first_data_);
  first_data_.clear();
  KILN_ASSIGN_OR_RETURN(std::string rest, file_.read(static_cast<size_t>(header_.data_bytes) - data.size()));
  data += rest;
  KILN_RETURN_IF_ERROR(check_read(data.size()));
  return data;
}

Status NpyReader::read_data_into(std::span<std::byte> out) {
  if (out.size() != header_.data_bytes) {
    return invalid_argument_error(file_.path() + ": asked to read " + std::to_string(out.size()) +
                                  " bytes of data where the header announces " +
                                  std::to_string(header_.data_bytes));
  }
  KILN_RETURN_IF_ERROR(check_file_size());
  if (!first_data_.empty()) std::memcpy(out.data(), first_data_.data(), first_data_.size());
  const size_t first = first_data_.size();
  first_data_.clear();
  KILN_ASSIGN_OR_RETURN(size_t rest, file_.read_into(out.subspan(first)));
  return check_read(first + rest);
}

Result<NpyArray> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(NpyReader reader, NpyReader::open(path));
  KILN_ASSIGN_OR_RETURN(std::string data, reader.read_data());
  NpyHeader header = reader.header();
  return NpyArray{header.dtype, std::move(header.shape), std::move(data)};
}

std::string npy_header(ir::DType dtype, const std::vector<int64_t>& shape) {
  std::string dict = std::string("{'descr': '") + descr_of(dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
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
  return out + dict;
}

std::string format_npy(const NpyArray& array) { return npy_header(array.dtype, array.shape) + array.data; }

Status write_npy(const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                 std::span<const std::byte> data) {
  const std::string header = npy_header(dtype, shape);
  const std::string_view parts[] = {header, {reinterpret_cast<const char*>(data.data()), data.size()}};
  return write_output_file(path, parts);
}

Status stage_npy(StagedFiles& files, const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                 std::span<const std::byte> data) {
  const std::string header = npy_header(dtype, shape);
  const std::string_view parts[] = {header, {reinterpret_cast<const char*>(data.data()), data.size()}};
  return files.stage(path, parts);
}

Status write_npy(const std::string& path, const NpyArray& array) {
  return write_npy(path, array.dtype, array.shape, std::as_bytes(std::span(array.data.data(), array.data.size())));
}

}  // namespace kiln::tools
