#include "kiln/ral/registry.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <mutex>
#include <new>

#include "kiln/base/log.h"
#include "kiln/ir/call.h"
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

// "1 output(s), attributes (factor)": what a call site passes beyond its types, for messages.
std::string site_text(const CallSite& site) {
  std::string text = std::to_string(site.outputs) + " output(s), attributes (";
  for (size_t a = 0; a < site.attributes.size(); ++a) text += (a ? ", " : "") + site.attributes[a];
  return text + ")";
}

// OK when `made` (a function made for an earlier call site) serves `site` too.
Status check_same_site(const Function& made, const CallSite& site) {
  if (!made.site || made.site->same_signature(site)) return Status();
  return invalid_argument_error(
      "call " + site.nickname + " on device '" + site.device + "': " + site.full_name + " was made for a call site with " +
      site_text(*made.site) + ", this one has " + site_text(site) +
      "; calls of a function without a signature that pass the same types must pass the same outputs and "
      "attribute names (the attributes travel by position)");
}

// OK when a program can call `name`: an identifier of the language ([A-Za-z_][A-Za-z0-9_]*)
// whose underscores stand alone between letters and digits (the mangled name splits at "___").
Status check_callable_name(std::string_view name) {
  const bool callable =
      !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) && name.front() != '_' &&
      name.back() != '_' && name.find("__") == std::string_view::npos &&
      std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (callable) return Status();
  return invalid_argument_error("'" + std::string(name) +
                                "' is not a name a program can call: letters and digits, with single underscores "
                                "between them, not starting with a digit (call NAME(...) in docs/language.md)");
}

}  // namespace

Registry::Registry() : id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)) {}

Registry& Registry::global() {
  static Registry* registry = [] {
    auto* r = new Registry();  // never destroyed: functions may be called until the process ends
    Status status;
    try {
      status = register_builtins(*r);
    } catch (const std::bad_alloc&) {
      // Under a small address-space limit (ulimit -v): the built-ins registered so far stay, and
      // a call of a missing one fails naming it; nothing ends the process.
      status = resource_exhausted_error("no memory to register every built-in function");
    }
    if (!status.ok()) KILN_LOG(kError, "registering the RAL built-ins: " + status.to_string());
    return r;
  }();
  return *registry;
}

Status Registry::add(Function function) {
  KILN_RETURN_IF_ERROR(check_callable_name(function.nickname));
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
  if (generic_locked(function.nickname, function.device)) {
    return already_exists_error("RAL function '" + function.nickname + "' is already registered for device '" +
                                function.device + "' as a function without a signature (GenericFunction)");
  }
  return add_locked(std::move(function));
}

Status Registry::add_locked(Function function) {
  if (by_full_name_.count(function.full_name)) {
    return already_exists_error("RAL function '" + function.full_name + "' is already registered");
  }
  auto owned = std::make_unique<Function>(std::move(function));
  const Function* f = owned.get();
  by_nickname_[nickname_key(f->nickname, f->device)].push_back(f);
  by_full_name_.emplace(f->full_name, std::move(owned));
  return Status();
}

std::shared_ptr<const GenericFunction> Registry::generic_locked(std::string_view nickname,
                                                                std::string_view device) const {
  for (std::string_view d : {device, std::string_view()}) {
    if (auto it = generic_.find(nickname_key(nickname, d)); it != generic_.end()) return it->second;
  }
  return nullptr;
}

Status Registry::add_generic(GenericFunction function) {
  // The name of a call with no arguments: checks that the nickname and device fit a full name.
  KILN_RETURN_IF_ERROR(check_callable_name(function.nickname));
  NameParts parts;
  const std::string sample =
      function.nickname + "___" + (function.device.empty() ? std::string("any") : function.device) + "___pvoid___void";
  if (!split_mangled_name(sample, &parts) || parts.nickname != function.nickname) {
    return invalid_argument_error("RAL function name '" + function.nickname + "'" +
                                  (function.device.empty() ? "" : " or device '" + function.device + "'") +
                                  " cannot be part of a full name (letters, digits and single underscores between them)");
  }
  if (ir::find_builtin_call(function.nickname)) {
    return invalid_argument_error("'" + function.nickname +
                                  "' is a built-in function of the language (docs/language.md, \"Calls\"); choose another name");
  }
  if (!function.make) return invalid_argument_error("generic RAL function '" + function.nickname + "' has no maker");
  const std::string where = function.device.empty() ? std::string("every device") : "device '" + function.device + "'";
  std::unique_lock lock(mutex_);
  // Any generic or concrete function of the nickname on a device this one covers.
  const std::string prefix = nickname_key(function.nickname, "");
  auto covered = [&](const std::string& key) {
    return key.starts_with(prefix) && (function.device.empty() || key == prefix ||
                                       key == nickname_key(function.nickname, function.device));
  };
  for (const auto& [key, g] : generic_) {
    if (covered(key)) {
      return already_exists_error("RAL function '" + function.nickname + "' is already registered for " +
                                  (g->device.empty() ? std::string("every device") : "device '" + g->device + "'"));
    }
  }
  for (const auto& [key, functions] : by_nickname_) {
    if (covered(key) && !functions.empty()) {
      return already_exists_error("RAL function '" + function.nickname + "' is already registered for device '" +
                                  functions.front()->device + "' (" + functions.front()->full_name +
                                  "), which this registration for " + where + " would cover");
    }
  }
  const std::string key = nickname_key(function.nickname, function.device);
  generic_.emplace(key, std::make_shared<const GenericFunction>(std::move(function)));
  return Status();
}

Result<const Function*> Registry::resolve(const CallSite& site) {
  std::shared_ptr<const GenericFunction> generic;
  {
    std::shared_lock lock(mutex_);
    if (auto it = by_full_name_.find(site.full_name); it != by_full_name_.end()) {
      KILN_RETURN_IF_ERROR(check_same_site(*it->second, site));
      return it->second.get();
    }
    generic = generic_locked(site.nickname, site.device);
    if (!generic) return nullptr;
  }
  // Made without the lock: the maker is the host language's code.
  Result<Function> made = generic->make(site);
  if (!made.ok()) return made.status().annotate("call " + site.nickname + " on device '" + site.device + "'");
  if (made->full_name != site.full_name || made->nickname != site.nickname || made->device != site.device) {
    return internal_error("the maker of '" + site.nickname + "' made " + made->full_name + " for " + site.full_name);
  }
  made->site = std::make_shared<const CallSite>(site);
  std::unique_lock lock(mutex_);
  // Another thread may have made it meanwhile: the first one stays.
  if (auto it = by_full_name_.find(site.full_name); it != by_full_name_.end()) {
    KILN_RETURN_IF_ERROR(check_same_site(*it->second, site));
    return it->second.get();
  }
  KILN_RETURN_IF_ERROR(add_locked(std::move(*made)));
  return by_full_name_.at(site.full_name).get();
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

namespace registry_detail {

Function function_of(std::string_view nickname, std::string_view device, std::string_view codes, Invoker invoke,
                     Memory memory) {
  Function f;
  f.full_name = std::string(nickname) + "___" + std::string(device) + "___" + std::string(codes);
  f.nickname = nickname;
  f.device = device;
  f.invoke = invoke;
  f.memory = memory;
  return f;
}

}  // namespace registry_detail

Function function_for_site(const CallSite& site, Invoker invoke, std::shared_ptr<void> data) {
  Function f;
  f.full_name = site.full_name;
  f.nickname = site.nickname;
  f.device = site.device;
  f.invoke = invoke;
  f.user = data.get();
  f.owner = std::move(data);
  return f;
}

bool register_at_startup(Function function) {
  Status status = Registry::global().add(std::move(function));
  if (!status.ok()) KILN_LOG(kError, "KILN_RAL_API: " + status.to_string());
  return status.ok();
}

}  // namespace kiln::ral
