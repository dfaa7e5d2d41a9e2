// `kiln trace-values FILE [--routine NAME]... [--statement LINE] [--first-nan]` (docs/cli.md):
// prints a value trace (tools/value_trace.h) as a tree, run → statement or call → values, or
// only the first statement or call that produced a NaN or an infinity. A statement logs only its
// first lines_per_statement points (KILN_TRACE_LINES), so --first-nan also warns, naming them,
// when statements it searched before its answer (or, finding none, any it searched) ran more
// points than they logged: a NaN among those would have come first and cannot show.
//
// What callers may rely on: the trace is printed to `out` as it is read, one run once its line
// has been checked, so an error on a later line leaves the runs before it printed. Every failure
// is returned, never thrown: exit 2 with "kiln: FILE:LINE: ..." for anything wrong in the file,
// and for a --routine or --statement that matches nothing in it (listing what the file has, with
// a "did you mean"); exit 1 for a file that cannot be read. A failed write to `out` stops the
// listing and returns success: the caller checks `out` (run_cli reports it).
#pragma once

#include <cstdio>
#include <optional>

#include "tools/options.h"

namespace kiln::tools {

// o.values_file, filtered by o.routines, o.statement and o.first_nan.
std::optional<Failure> print_value_trace(const Options& o, std::FILE* out);

}  // namespace kiln::tools
