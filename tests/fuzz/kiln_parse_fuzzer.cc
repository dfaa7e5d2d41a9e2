// The `.kiln` parser alone: any bytes give either a program or diagnostics with locations inside
// the text; a program validates, prints, and its printed form parses to the same print.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"

using kiln::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::lang::ParseResult r = kiln::lang::parse(text, "fuzz.kiln");
  if (!r.program) {
    check(!r.diagnostics.empty(), "a failed parse gives no diagnostics");
    check(r.diagnostics.size() <= kiln::lang::kMaxDiagnostics + 1, "more diagnostics than the limit");
    for (const kiln::lang::Diagnostic& d : r.diagnostics) {
      check(d.loc.line >= 1 && d.loc.column >= 1, "a diagnostic without a location", d.message);
      check(!d.message.empty(), "a diagnostic without a message");
    }
    // Formatting quotes the offending line; it must cope with any location the parser gives.
    (void)kiln::lang::format_diagnostics("fuzz.kiln", text, r.diagnostics);
    return 0;
  }
  check(r.diagnostics.empty(), "a program together with diagnostics");
  kiln::Status valid = kiln::ir::validate_program(*r.program);
  check(valid.ok(), "a parsed program does not validate", valid.to_string());
  const std::string printed = kiln::ir::print_program(*r.program);
  kiln::lang::ParseResult again = kiln::lang::parse(printed, "printed.kiln");
  check(again.program.has_value(), "the printed program does not parse",
        printed + "\n" + kiln::lang::format_diagnostics("printed.kiln", printed, again.diagnostics));
  check(kiln::ir::print_program(*again.program) == printed, "print(parse(print(p))) != print(p)", printed);
  return 0;
}
