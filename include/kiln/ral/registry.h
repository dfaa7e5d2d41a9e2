// The RAL registry: every function compiled code may call, by full (mangled) name.
//
// A function is registered for one device under a nickname ("sort", "cpu"); its full name comes
// from its C++ type (kiln/ral/mangle.h). Registration and lookup are thread-safe; functions are
// never removed, so a `const Function*` stays valid for the registry's life. The call path
// (ExecutionContext::call) looks names up through a per-thread cache, so a warm call takes no
// lock. Registry::global() holds the built-in functions and whatever the host program adds.
#pragma once

#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ral/mangle.h"

namespace kiln::ral {

class ExecutionContext;
struct Function;
struct CallSite;

// Unpacks `args` (one pointer per argument after the context, then one per result) and runs
// `function` (whose `user` a registration from C uses). An error status is the function's
// failure; the caller annotates it.
using Invoker = Status (*)(const Function& function, ExecutionContext& context, void** args);

// Where a function's memref arguments point when the runtime calls it for a `call` statement.
enum class Memory {
  // Host memory: the runtime maps each tensor's buffer for the call (the default; every device).
  kHost,
  // The tensor's `hal::Buffer*` itself, unmapped: the function reaches the device memory through
  // its driver (on opencl, the cl_mem; ral/library/clblast.h) and has finished its device work
  // when it returns. Compiled code never calls such a function.
  kDevice,
  // As kDevice, for a function that only queues device work (the cuda library's): on a queue with
  // a device stream of its own the runtime runs the call in the queue's order, and the function
  // puts its work on ExecutionContext::device_stream() and returns without waiting for it
  // (hal::StreamCallFn); where there is none, it runs as kDevice.
  kDeviceStream,
};

struct Function {
  std::string full_name;  // sort___cpu___pvoid_m2df32_m2df32_i64___void
  std::string nickname;   // sort
  std::string device;     // cpu
  Invoker invoke = nullptr;
  Memory memory = Memory::kHost;
  void* user = nullptr;  // for the invoker; null for functions registered from C++
  // A collective (kiln/ral/world.h): it runs across the processes of the job and may end after
  // it returns (ExecutionContext::take_completion), so the runtime runs it as a step of its own,
  // never among a command buffer's kernels.
  bool collective = false;
  // For a function declared kDevice or kDeviceStream that can take host memory too (the cuda
  // collectives, which cross through mapped host memory where NCCL is missing): asked when a call
  // binds; false binds the call as kHost, and the runtime then passes mapped host memory. Its
  // answer must not change during the process: the function asks it again to know which it got.
  // An error fails the binding.
  Result<bool> (*takes_device_memory)() = nullptr;
  // What `user` points into, released with the function; null when `user` needs no owner.
  std::shared_ptr<const void> owner;
  // For a function a GenericFunction made: the call site it was made for (Registry::resolve).
  std::shared_ptr<const CallSite> site;
};

// What a call site passes beyond the types its full name spells, for a function made per call
// site (GenericFunction): which memrefs are outputs, and the attributes' names.
struct CallSite {
  std::string full_name;  // NAME___DEVICE___pvoid_<memref codes>_<f64 per attribute>___void
  std::string nickname;
  std::string device;
  size_t outputs = 0;                   // the last `outputs` memrefs are the call's outputs
  std::vector<std::string> attributes;  // the attributes' names, in the order written

  bool same_signature(const CallSite& other) const {
    return full_name == other.full_name && outputs == other.outputs && attributes == other.attributes;
  }
};

// A function without a declared signature (a host language's function: the Python package's
// kiln.register_call), registered under a nickname for one device or for every device. When a
// call binds a full name that no function has, the generic function covering its nickname and
// device makes the concrete Function for that call site, which the registry then keeps like any
// other (compiled code calls it by its full name). `make` runs without the registry's lock, on
// whatever thread links, and must not block on the host language.
struct GenericFunction {
  std::string nickname;
  std::string device;  // empty: every device
  std::function<Result<Function>(const CallSite& site)> make;
};

// What a maker usually makes: the function of `site`'s names with `invoke`, whose `user` is
// `data` (kept alive by the function).
Function function_for_site(const CallSite& site, Invoker invoke, std::shared_ptr<void> data);

class Registry {
 public:
  Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry, with the built-in functions registered on first use.
  static Registry& global();

  // ALREADY_EXISTS for a full name registered before, or a nickname and device that a generic
  // function covers; INVALID_ARGUMENT for a name that is not NAME___DEVICE___ARGS___RESULTS or
  // whose parts disagree with nickname and device.
  Status add(Function function);
  // ALREADY_EXISTS when a generic function of the nickname covers one of the same devices, or a
  // function is registered under the nickname for one of them; INVALID_ARGUMENT for a nickname
  // or device that cannot be part of a full name, for a built-in function of the language (its
  // calls pass every attribute, typed: docs/ral.md), or without `make`.
  Status add_generic(GenericFunction function);

  // The function a call site binds: the one registered under its full name, else one made for it
  // by the generic function covering its nickname and device (then registered); nullptr when
  // there is neither (the caller says what it looked for). A made function serves every later
  // call site with the same full name only if it passes the same outputs and attribute names:
  // another is INVALID_ARGUMENT naming both (its values would reach the wrong names). The
  // maker's error, annotated.
  Result<const Function*> resolve(const CallSite& site);

  // NOT_FOUND naming the function and the device.
  Result<const Function*> find(std::string_view full_name) const;
  // Every function registered under (nickname, device), in registration order; NOT_FOUND if none.
  Result<std::vector<const Function*>> find_nickname(std::string_view nickname,
                                                    std::string_view device) const;
  std::vector<std::string> full_names() const;

  // find() through a per-thread cache keyed by the name's address (checked against the name
  // itself, so a reused address cannot return the wrong function); nullptr when unknown.
  const Function* lookup(const char* full_name) const;

  // Distinguishes registries in the per-thread cache; never reused within a process.
  uint64_t id() const { return id_; }

 private:
  const uint64_t id_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<Function>> by_full_name_;  // guarded by mutex_
  std::unordered_map<std::string, std::vector<const Function*>> by_nickname_;  // "nick\0device"
  // "nick\0device" ("nick\0" for every device); guarded by mutex_
  std::unordered_map<std::string, std::shared_ptr<const GenericFunction>> generic_;

  // A generic function covering (nickname, device); under mutex_.
  std::shared_ptr<const GenericFunction> generic_locked(std::string_view nickname, std::string_view device) const;
  Status add_locked(Function function);
};

namespace registry_detail {

template <typename R>
struct ResultOf {
  using Value = R;
};
template <typename T>
struct ResultOf<Result<T>> {
  using Value = T;
};

template <auto Fn, typename F = decltype(Fn)>
struct Adapter;

template <auto Fn, typename R, typename... A>
struct Adapter<Fn, R (*)(ExecutionContext*, A...)> {
  static Status invoke(const Function&, ExecutionContext& context, void** args) {
    return unpack(context, args, std::index_sequence_for<A...>{});
  }
  template <size_t... I>
  static Status unpack(ExecutionContext& context, void** args, std::index_sequence<I...>) {
    // args[0] points to the context pointer itself; the arguments follow, then the result.
    if constexpr (std::is_void_v<R>) {
      Fn(&context, *static_cast<std::remove_cvref_t<A>*>(args[I + 1])...);
      return Status();
    } else if constexpr (std::is_same_v<R, Status>) {
      return Fn(&context, *static_cast<std::remove_cvref_t<A>*>(args[I + 1])...);
    } else {
      R result = Fn(&context, *static_cast<std::remove_cvref_t<A>*>(args[I + 1])...);
      using V = typename ResultOf<R>::Value;
      V* out = static_cast<V*>(args[sizeof...(A) + 1]);
      if constexpr (std::is_same_v<R, V>) {
        *out = std::move(result);
      } else {
        if (!result.ok()) return result.status();
        *out = std::move(*result);
      }
      return Status();
    }
  }
};

// The Function NICKNAME___DEVICE___CODES with this invoker and memory, built out of line so that
// each make_function below stays a call with constants (the library registers thousands).
Function function_of(std::string_view nickname, std::string_view device, std::string_view codes, Invoker invoke,
                     Memory memory);

}  // namespace registry_detail

// The Function for `Fn` registered as (Name, Device): full name from Fn's type, its invoker, and
// where its memrefs point (M).
// Fn is `R fn(ExecutionContext*, A...)` with R void, Status, a value or Result of a value.
template <FixedString Name, FixedString Device, auto Fn, Memory M = Memory::kHost>
Function make_function() {
  return registry_detail::function_of(Name.view(), Device.view(), Signature<decltype(Fn)>::codes.view(),
                                      &registry_detail::Adapter<Fn>::invoke, M);
}

// The same with the device chosen at run time: one instantiation of Fn's registration serves
// every device that runs the same code (the library's host functions on cpu, opencl, interp).
template <FixedString Name, auto Fn, Memory M = Memory::kHost>
Function make_function_for(std::string_view device) {
  return registry_detail::function_of(Name.view(), device, Signature<decltype(Fn)>::codes.view(),
                                      &registry_detail::Adapter<Fn>::invoke, M);
}

// Registers Fn in Registry::global() when the program starts; a failure (a name registered
// twice) is logged, as nothing can return it from there. Use it at namespace scope in the host
// program's own sources (a registration in a static library is dropped unless something else of
// its object file is linked: call Registry::add with make_function there instead).
bool register_at_startup(Function function);

}  // namespace kiln::ral

#define KILN_RAL_CONCAT_INNER_(a, b) a##b
#define KILN_RAL_CONCAT_(a, b) KILN_RAL_CONCAT_INNER_(a, b)
#define KILN_RAL_API(name, device, fn)                                                      \
  [[maybe_unused]] static const bool KILN_RAL_CONCAT_(kiln_ral_registered_, __LINE__) =     \
      ::kiln::ral::register_at_startup(::kiln::ral::make_function<name, device, fn>())
