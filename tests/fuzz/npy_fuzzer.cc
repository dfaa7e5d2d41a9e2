// The .npy reader (`kiln run --input`): any bytes give an array or an error; an array's data
// holds exactly its elements, and writing it back gives bytes that parse to the same array.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "tools/npy.h"

using kiln::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::Result<kiln::tools::NpyArray> array = kiln::tools::parse_npy(bytes, "fuzz.npy");
  if (!array.ok()) {
    check(array.status().message().find("fuzz.npy") != std::string::npos,
          "an npy error does not name the file", array.status().to_string());
    return 0;
  }
  uint64_t elements = 1;
  for (int64_t d : array->shape) {
    check(d >= 0, "a negative dimension");
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t element_size = kiln::ir::dtype_size(array->dtype);  // every element type: 1 to 8 bytes
  check(array->data.size() == elements * element_size, "the data does not hold shape's elements",
        kiln::tools::describe(array->dtype, array->shape));
  const std::string written = kiln::tools::format_npy(*array);
  kiln::Result<kiln::tools::NpyArray> again = kiln::tools::parse_npy(written, "again.npy");
  check(again.ok(), "a written array does not parse", again.ok() ? "" : again.status().to_string());
  check(again->dtype == array->dtype && again->shape == array->shape && again->data == array->data,
        "a written array parses to another array");
  return 0;
}
