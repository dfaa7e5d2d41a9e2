#include "kiln/base/shared_library.h"

#include <dlfcn.h>

namespace kiln {

Result<void*> load_shared_library(const std::vector<std::string>& names) {
  std::string errors;
  for (const std::string& name : names) {
    if (void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = ::dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (error ? error : name);
  }
  return unavailable_error(errors);
}

Result<void*> load_shared_library(std::initializer_list<const char*> names) {
  return load_shared_library(std::vector<std::string>(names.begin(), names.end()));
}

void* SymbolBinder::find(const char* symbol) {
  void* address = ::dlsym(handle_, symbol);
  if (!address) missing_ += std::string(missing_.empty() ? "" : ", ") + symbol;
  return address;
}

}  // namespace kiln
