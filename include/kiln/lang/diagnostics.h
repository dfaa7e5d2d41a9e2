// Diagnostics as people read them (docs/cli.md, "Errors and exit status"):
//
//   FILE:LINE:COLUMN: error: MESSAGE
//   the source line
//          ^
//
// Columns count bytes from 1. The quoted line keeps tabs (so the caret lines up in a terminal),
// shows other control bytes and invalid UTF-8 as '?', and is cut to a window around the column
// when it is very long. A diagnostic without a line (line 0, e.g. from ProgramBuilder) is just
// `FILE: error: MESSAGE`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/statement.h"

namespace kiln::lang {

// One diagnostic: the error line, then (when the line exists in `text`) the quoted line and the
// caret line; every line ends with '\n'.
std::string format_diagnostic(std::string_view file_name, std::string_view text,
                              const ir::Diagnostic& diagnostic);

// All of them, in the order given.
std::string format_diagnostics(std::string_view file_name, std::string_view text,
                               const std::vector<ir::Diagnostic>& diagnostics);

}  // namespace kiln::lang
