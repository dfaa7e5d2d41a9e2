// Pieces of JSON text that kiln's writers share (the Chrome trace, the value trace).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Appends `text` as a JSON string: quoted, with '"', '\\' and control characters escaped.
void append_json_string(std::string& out, std::string_view text);
// Appends `value` as a JSON number in its shortest form that reads back to the same double, or
// the strings "nan", "inf", "-inf" (JSON has no such numbers).
void append_json_number(std::string& out, double value);

}  // namespace kiln
