// Loading an optional shared library at run time (libOpenCL, libclblast), so that kiln builds and
// runs without it.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

// dlopen()s the first of `names` that loads (RTLD_NOW | RTLD_LOCAL) and never closes it.
// UNAVAILABLE when none does, with each name's dlerror() joined by "; ".
Result<void*> load_shared_library(std::initializer_list<const char*> names);
Result<void*> load_shared_library(const std::vector<std::string>& names);

// Binds function pointers to the symbols of a library load_shared_library loaded, remembering
// which were missing (those pointers are set to null).
class SymbolBinder {
 public:
  explicit SymbolBinder(void* handle) : handle_(handle) {}
  template <typename Fn>
  void bind(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(find(symbol));
  }
  // The missing symbols joined by ", ", "" when every one was found.
  const std::string& missing() const { return missing_; }

 private:
  void* find(const char* symbol);

  void* handle_;
  std::string missing_;
};

}  // namespace kiln
