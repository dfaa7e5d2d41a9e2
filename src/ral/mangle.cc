#include "kiln/ral/mangle.h"

namespace kiln::ral {

bool split_mangled_name(std::string_view full_name, NameParts* parts) {
  constexpr std::string_view kSeparator = "___";
  std::string_view fields[4];
  std::string_view rest = full_name;
  for (int i = 0; i < 3; ++i) {
    const size_t at = rest.find(kSeparator);
    if (at == std::string_view::npos) return false;
    fields[i] = rest.substr(0, at);
    rest.remove_prefix(at + kSeparator.size());
  }
  fields[3] = rest;
  // Underscores only between words, so that the "___" separators are unambiguous.
  for (std::string_view field : fields) {
    if (field.empty() || field.front() == '_' || field.back() == '_' ||
        field.find("__") != std::string_view::npos) {
      return false;
    }
  }
  *parts = NameParts{fields[0], fields[1], fields[2], fields[3]};
  return true;
}

}  // namespace kiln::ral
