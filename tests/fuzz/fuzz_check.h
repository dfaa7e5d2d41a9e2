// What the fuzz targets share: a check that turns a broken property into a crash, which is how
// libFuzzer learns of it (it saves the input and stops).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kiln::fuzz {

// Stops the run with `what` and the text that shows it (both printed in full to stderr).
[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz property violated: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

}  // namespace kiln::fuzz
