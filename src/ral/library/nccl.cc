#include "ral/library/nccl.h"

#include <optional>

#include "kiln/base/env.h"
#include "kiln/base/shared_library.h"

namespace kiln::ral::library {

namespace {

Status status_of(const Nccl& library, ncclResult_t result, const char* call) {
  if (result == kNcclSuccess) return Status();
  const char* text = library.GetErrorString ? library.GetErrorString(result) : nullptr;
  return unavailable_error(std::string(call) + " failed: " + (text ? text : "NCCL error") + " (" +
                           std::to_string(result) + ")");
}

}  // namespace

const Nccl& nccl() {
  static const Nccl loaded = [] {
    Nccl out;
    const std::optional<std::string> named = env_string("KILN_NCCL_LIBRARY");
    Result<void*> handle = named ? load_shared_library({*named}) : load_shared_library({"libnccl.so.2", "libnccl.so"});
    if (!handle.ok()) {
      out.status = unavailable_error("NCCL was not found (" + handle.status().message() +
                                     "); install it (the nvidia-nccl-cu12 or -cu13 wheel, or the system's "
                                     "libnccl2) and name it with KILN_NCCL_LIBRARY where the loader does not find it");
      return out;
    }
    SymbolBinder binder(*handle);
#define KILN_BIND(member, symbol) binder.bind(out.member, #symbol);
    KILN_NCCL_FUNCTIONS(KILN_BIND)
#undef KILN_BIND
    if (!binder.missing().empty()) {
      out.status = unavailable_error("NCCL lacks " + binder.missing());
      return out;
    }
    int version = 0;
    if (Status asked = status_of(out, out.GetVersion(&version), "ncclGetVersion"); !asked.ok()) {
      out.status = asked;
      return out;
    }
    // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9 (X * 1000 + Y * 100 + Z before).
    out.version = version >= 20900 ? std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                                         std::to_string(version % 100)
                                   : std::to_string(version / 1000) + "." + std::to_string(version / 100 % 10) + "." +
                                         std::to_string(version % 100);
    if (version < kNcclMinimumVersion) {
      out.status = unavailable_error("NCCL " + out.version + " is older than 2.10, the first with bf16");
    }
    return out;
  }();
  return loaded;
}

Status nccl_status(ncclResult_t result, const char* call) { return status_of(nccl(), result, call); }

}  // namespace kiln::ral::library
