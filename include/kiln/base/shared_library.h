// Loading an optional shared library at run time (libOpenCL, libclblast), so that kiln builds and
// runs without it.
#pragma once

#include <initializer_list>
#include <string>

#include "kiln/base/status.h"

namespace kiln {

// dlopen()s the first of `names` that loads (RTLD_NOW | RTLD_LOCAL) and never closes it.
// UNAVAILABLE when none does, with each name's dlerror() joined by "; ".
Result<void*> load_shared_library(std::initializer_list<const char*> names);

}  // namespace kiln
