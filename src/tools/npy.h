// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0): the arrays of
// `kiln run --input/--output`, of every element type (docs/cli.md, ".npy files"): little-endian
// (any order for one-byte types), C order. bf16 is written '<V2', as NumPy writes an
// ml_dtypes.bfloat16 array, and read from '<V2' or from '<u2' bit patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/file.h"
#include "kiln/base/status.h"
#include "kiln/ir/program.h"

namespace kiln::tools {

struct NpyArray {
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::string data;            // raw little-endian elements, C order
};

// "f32 [3, 4]", the way messages name what a file holds or a tensor expects.
std::string describe(ir::DType dtype, const std::vector<int64_t>& shape);

// Whether a file whose header says `file` holds the values of a tensor of type `declared`: the
// same type, or u16 ('<u2') bit patterns for a bf16 tensor. Nothing else converts.
bool npy_holds(ir::DType file, ir::DType declared);

// INVALID_ARGUMENT naming `name` and the element when a byte of a bool array is neither 0 nor 1
// (what the kernels' bool loads assume).
Status check_npy_bools(std::span<const std::byte> data, std::string_view name);

// The most header bytes kiln reads from a .npy file. numpy writes a few hundred (its own reader
// refuses more than 10000 unless told otherwise); a longer header is refused, not read.
inline constexpr size_t kMaxNpyHeaderBytes = 1 << 16;

// What a .npy header says.
struct NpyHeader {
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  size_t data_offset = 0;      // where the data starts in the file
  uint64_t data_bytes = 0;     // how many bytes of data the shape and dtype call for
};

// A .npy file opened for reading: its header is read and checked at once, its data only when
// asked for, so that a caller can refuse a header it does not expect before reading any data.
class NpyReader {
 public:
  static Result<NpyReader> open(const std::string& path);
  const NpyHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }
  // Exactly header().data_bytes of data (never "to the end"); the file must end there.
  Result<std::string> read_data();
  // The same into `out`, which must hold exactly header().data_bytes (a device's memory, read
  // straight from the file with no copy between).
  Status read_data_into(std::span<std::byte> out);
  // For a regular file, whether its size is what the header calls for (INVALID_ARGUMENT saying
  // how many bytes it holds); read_data and read_data_into check it again.
  Status check_file_size() const;

 private:
  Status check_read(uint64_t got);  // after: all of it, and the file ends there
  NpyReader(InputFile file, NpyHeader header, std::string first_data)
      : file_(std::move(file)), header_(std::move(header)), first_data_(std::move(first_data)) {}
  InputFile file_;
  NpyHeader header_;
  std::string first_data_;  // data bytes read along with the header
};

// Parses the bytes of a .npy file. `name` (the path) appears in every message, which says what
// the file holds when that is the problem: "x.npy: dtype '>f4' (big-endian) is not supported".
Result<NpyArray> parse_npy(std::string_view bytes, std::string_view name);
// NpyReader::open and read_data.
Result<NpyArray> read_npy(const std::string& path);
// The magic, version and header of a version 1.0 file; the data follows it.
std::string npy_header(ir::DType dtype, const std::vector<int64_t>& shape);
std::string format_npy(const NpyArray& array);
// Writes the header and `data` (in place: a device's memory is never copied to join them).
Status write_npy(const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                 std::span<const std::byte> data);
// The same staged into `files`, to be written when they are committed (kiln/base/file.h).
Status stage_npy(StagedFiles& files, const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                 std::span<const std::byte> data);
// Writes through write_output_file (a device or FIFO is written in place, a link's target replaced).
Status write_npy(const std::string& path, const NpyArray& array);

}  // namespace kiln::tools
