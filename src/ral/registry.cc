#include "kiln/ral/registry.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "kiln/base/log.h"
#include "ral/builtins.h"

namespace kiln::ral {

namespace {

std::atomic<uint64_t> next_registry_id{1};

std::string nickname_key(std::string_view nickname, std::string_view device) {
  std::string key(nickname);
  key += '\0';
  key += device;
  return key;
}

// The function and device a full name asks for, for NOT_FOUND messages.
std::string describe(std::string_view full_name) {
  NameParts parts;
  if (!split_mangled_name(full_name, &parts)) return "'" + std::string(full_name) + "'";
  return "'" + std::string(parts.nickname) + "' for device '" + std::string(parts.device) +
         "' (" + std::string(full_name) + ")";
}

}  // namespace

Registry::Registry() : id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)) {}

Registry& Registry::global() {
  static Registry* registry = [] {
    auto* r = new Registry();  // never destroyed: functions may be called until the process ends
    Status status = register_builtins(*r);
    if (!status.ok()) KILN_LOG(kError, "registering the RAL built-ins: " + status.to_string());
    return r;
  }();
  return *registry;
}

Status Registry::add(Function function) {
  NameParts parts;
  if (!split_mangled_name(function.full_name, &parts)) {
    return invalid_argument_error("RAL function name '" + function.full_name +
                                  "' is not NAME___DEVICE___ARGCODES___RETCODES");
  }
  if (parts.nickname != function.nickname || parts.device != function.device) {
    return invalid_argument_error("RAL function name '" + function.full_name +
                                  "' does not match its nickname '" + function.nickname +
                                  "' and device '" + function.device + "'");
  }
  if (!function.invoke) {
    return invalid_argument_error("RAL function '" + function.full_name + "' has no invoker");
  }
  std::unique_lock lock(mutex_);
  if (by_full_name_.count(function.full_name)) {
    return already_exists_error("RAL function '" + function.full_name + "' is already registered");
  }
  auto owned = std::make_unique<Function>(std::move(function));
  const Function* f = owned.get();
  by_nickname_[nickname_key(f->nickname, f->device)].push_back(f);
  by_full_name_.emplace(f->full_name, std::move(owned));
  return Status();
}

Result<const Function*> Registry::find(std::string_view full_name) const {
  std::shared_lock lock(mutex_);
  auto it = by_full_name_.find(std::string(full_name));
  if (it == by_full_name_.end()) {
    return not_found_error("no RAL function " + describe(full_name) + " is registered");
  }
  return it->second.get();
}

Result<std::vector<const Function*>> Registry::find_nickname(std::string_view nickname,
                                                            std::string_view device) const {
  std::shared_lock lock(mutex_);
  auto it = by_nickname_.find(nickname_key(nickname, device));
  if (it == by_nickname_.end()) {
    return not_found_error("no RAL function '" + std::string(nickname) + "' is registered for device '" +
                           std::string(device) + "'");
  }
  return it->second;
}

std::vector<std::string> Registry::full_names() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, f] : by_full_name_) names.push_back(name);
  return names;
}

const Function* Registry::lookup(const char* full_name) const {
  // A small direct-mapped cache per thread: a warm call costs a hash of the pointer and one
  // string comparison, no lock. Entries are only ever added to a registry, so a cached function
  // stays valid; the comparison guards against another name at a reused address.
  struct Slot {
    const char* name = nullptr;
    uint64_t registry = 0;
    const Function* function = nullptr;
  };
  static constexpr size_t kSlots = 64;
  thread_local std::array<Slot, kSlots> cache;
  Slot& slot = cache[(reinterpret_cast<uintptr_t>(full_name) >> 4) % kSlots];
  if (slot.name == full_name && slot.registry == id_ &&
      std::strcmp(slot.function->full_name.c_str(), full_name) == 0) {
    return slot.function;
  }
  Result<const Function*> found = find(full_name);
  if (!found.ok()) return nullptr;
  slot = Slot{full_name, id_, *found};
  return *found;
}

bool register_at_startup(Function function) {
  Status status = Registry::global().add(std::move(function));
  if (!status.ok()) KILN_LOG(kError, "KILN_RAL_API: " + status.to_string());
  return status.ok();
}

}  // namespace kiln::ral
