// One run of a routine, as the RAL sees it: the kiln_ral_context_t handed to compiled code, the
// inputs it receives and the outputs it sends (recv_input / send_output), and its per-run state:
// workspace memory, the random-number counter and the first error.
//
// Compiled code calls ExecutionContext::call through the ABI's call function. A function that
// fails does not abort anything: its status, annotated with the function and the device, becomes
// the execution's first error, the call returns non-zero, and compiled code returns it, which
// fails the dispatch and its signal semaphores with that status.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ral/abi.h"
#include "kiln/ral/context.h"
#include "kiln/ral/world.h"

namespace kiln::ral {

class ExecutionContext {
 public:
  // Starts an execution: the context resources see on_execution_start. `run` numbers the
  // routine's runs (it keys the random streams); `seed` is the run's seed.
  ExecutionContext(Context& context, uint64_t seed = 0, uint64_t run = 0);
  // Finishes if finish() was not called.
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  // What compiled code receives. Its call function is ExecutionContext::call.
  kiln_ral_context_t* abi() { return &abi_; }
  static ExecutionContext& from_abi(kiln_ral_context_t* abi) {
    return *static_cast<ExecutionContext*>(abi->impl);
  }
  Context& context() const { return context_; }
  // Runs part(0) ... part(parts - 1) on the threads of the context's host device
  // (hal::Device::host_parallel), or in order on the calling thread where it has none; returns
  // when every one has run. host_threads() is how many threads that is.
  void host_parallel(uint64_t parts, const std::function<void(uint64_t)>& part) const {
    if (hal::Device* device = context_.host_device()) return device->host_parallel(parts, part);
    for (uint64_t i = 0; i < parts; ++i) part(i);
  }
  uint32_t host_threads() const {
    hal::Device* device = context_.host_device();
    return device ? device->host_threads() : 1;
  }
  const std::string& device() const { return context_.device(); }
  // The device stream of the queue whose order the call at hand runs in (a CUstream on cuda:
  // hal::StreamCallFn), null when it runs on a host thread once its waits are met. A function
  // declared Memory::kDeviceStream that finds one puts its work on it and returns without waiting
  // for it; with none, it finishes its device work before it returns. The runtime sets it
  // around such a call; an execution's calls run one at a time.
  void* device_stream() const { return device_stream_; }
  void set_device_stream(void* stream) { device_stream_ = stream; }
  uint64_t seed() const { return seed_; }
  uint64_t run() const { return run_; }

  // Calls `full_name` with the packed `args` (kiln/ral/abi.h). 0 on success; otherwise the
  // failure is recorded (status()) and a non-zero value returned. An unknown name is NOT_FOUND
  // naming the function and the device.
  int call(const char* full_name, void** args);

  // The entry's inputs and outputs. The runtime sets the inputs before the entry runs and takes
  // the outputs after; an output's shape is known only when the entry sends it, which is how an
  // entry can produce a result whose size depends on the data.
  void set_input(int64_t index, kiln_ral_buffer_t buffer);
  Result<kiln_ral_buffer_t> recv_input(int64_t index) const;
  Status send_output(int64_t index, kiln_ral_buffer_t buffer);
  // The sent output `index`, with its sizes copied (they need not outlive the send).
  struct Output {
    kiln_ral_buffer_t buffer;
    std::vector<int64_t> sizes;
  };
  Result<Output> output(int64_t index) const;

  // `bytes` of scratch memory, 64-byte aligned, freed when the execution finishes.
  Result<void*> workspace(size_t bytes);

  // Reserves `blocks` consecutive 128-bit counter blocks of this run's random stream and returns
  // the first; successive calls get disjoint ranges, in call order.
  uint64_t take_random_blocks(uint64_t blocks);

  // A call that ends after it returns (a collective, Function::collective). Whoever runs such a
  // call may offer a completion first; the function takes it, starts its work and returns a
  // kDeferred status (which call() counts as success), and the work runs `done` once with its
  // outcome. With none offered (compiled code calling) the function finishes before returning.
  struct Completion {
    std::function<void(Status)> done;
    std::string site;  // the call statement, for messages: "routine 'step', line 4"
    // Set where the runtime starts several collectives together (World::start_all): the function
    // hands its collective (with `done`) here instead of starting it.
    std::function<void(Collective, std::function<void(Status)>)> gather;
  };
  void offer_completion(Completion completion);
  // The completion offered and not yet taken, taken; nullopt when there is none.
  std::optional<Completion> take_completion();

  // Keeps the first failure; later ones are dropped.
  void fail(Status status);
  Status status() const;

  // Runs the execution-finish hooks, frees the workspace and execution resources; returns the
  // first error (of a call or a hook). Idempotent: later calls return the same status.
  Status finish();

  // The resource under `key` (see Context::get_or_create), typed. INTERNAL if `key` holds a
  // resource of another type.
  template <typename T>
  Result<T*> get_or_create(std::string_view key, Lifetime lifetime,
                           const std::function<Result<std::unique_ptr<T>>()>& create) {
    KILN_ASSIGN_OR_RETURN(Resource * resource,
                          context_.get_or_create(key, lifetime, [&]() -> Result<std::unique_ptr<Resource>> {
                            KILN_ASSIGN_OR_RETURN(std::unique_ptr<T> made, create());
                            return std::unique_ptr<Resource>(std::move(made));
                          }, this));
    T* typed = dynamic_cast<T*>(resource);
    if (!typed) return internal_error("RAL resource '" + std::string(key) + "' has another type");
    return typed;
  }

 private:
  friend class Context;
  struct AlignedFree {
    void operator()(void* p) const;
  };

  kiln_ral_context_t abi_;
  Context& context_;
  const uint64_t seed_;
  const uint64_t run_;
  std::atomic<uint64_t> random_blocks_{0};
  void* device_stream_ = nullptr;

  std::mutex create_mutex_;   // serializes factories of execution resources
  mutable std::mutex mutex_;  // guards everything below
  Status first_error_;
  std::optional<Status> finished_;
  std::unordered_map<int64_t, kiln_ral_buffer_t> inputs_;
  std::unordered_map<int64_t, Output> outputs_;
  std::vector<std::unique_ptr<void, AlignedFree>> workspace_;
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources_;  // kExecution
  std::optional<Completion> completion_;
};

}  // namespace kiln::ral
