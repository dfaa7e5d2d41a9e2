#include "kiln/hal/executable.h"

#include <string>

namespace kiln::hal {

Result<uint32_t> Executable::lookup_export(std::string_view name) const {
  for (size_t i = 0; i < exports_.size(); ++i) {
    if (exports_[i].name == name) return static_cast<uint32_t>(i);
  }
  return not_found_error("executable has no export named '" + std::string(name) + "'");
}

Result<const ExportInfo*> Executable::export_info(uint32_t ordinal) const {
  if (ordinal >= exports_.size()) {
    return invalid_argument_error("export ordinal " + std::to_string(ordinal) +
                              " is out of range; the executable has " +
                              std::to_string(exports_.size()) + " export(s)");
  }
  return &exports_[ordinal];
}

}  // namespace kiln::hal
