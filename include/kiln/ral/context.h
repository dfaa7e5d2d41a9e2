// A RAL context: what one device context keeps for the library functions called from its
// routines: the registry they are looked up in, and resources created once on first use
// ("initialization-free", as in BladeDISC): a BLAS handle, a compiled sort kernel, a workspace.
//
// Resources have one of three lifetimes:
//  - kGlobal: one per process, shared by every context (a table built once);
//  - kContext: one per Context, destroyed by finish() or the destructor;
//  - kExecution: one per ExecutionContext (one routine run), destroyed when the run finishes.
// Hooks: every context resource sees each execution start and finish; finish() tells every
// context resource that the context ends, before destroying them.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/ral/registry.h"

namespace kiln::ral {

class Context;
class ExecutionContext;

enum class Lifetime { kGlobal, kContext, kExecution };

class Resource {
 public:
  virtual ~Resource() = default;
  // Called for context resources as each execution begins and ends (in creation order), on the
  // thread that runs it; an error from on_execution_finish fails the execution.
  virtual void on_execution_start(ExecutionContext&) {}
  virtual Status on_execution_finish(ExecutionContext&) { return Status(); }
  // Called once, from Context::finish, before the resource is destroyed.
  virtual void on_context_finish(Context&) {}
};

using ResourceFactory = std::function<Result<std::unique_ptr<Resource>>()>;

class Context {
 public:
  // `device` is the device name functions are looked up for ("cpu", "interp", "opencl").
  explicit Context(std::string device, Registry& registry = Registry::global());
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::string& device() const { return device_; }
  Registry& registry() const { return registry_; }

  // The device whose threads library functions share for their work on the host
  // (ExecutionContext::host_parallel); without one they run it on the calling thread. Set before
  // the first execution.
  void set_host_device(std::shared_ptr<hal::Device> device) { host_device_ = std::move(device); }
  hal::Device* host_device() const { return host_device_.get(); }

  // Runs the context-finish hooks and destroys the context resources; idempotent. Executions
  // must have finished.
  void finish();

  // The resource under `key` with this lifetime, made by `create` the first time (once, even when
  // several threads ask at once). A factory's error is returned and nothing is stored, so a later
  // call tries again. Keys are per lifetime; name them after their function ("gemm.cpu.pack").
  Result<Resource*> get_or_create(std::string_view key, Lifetime lifetime,
                                  const ResourceFactory& create, ExecutionContext* execution);

 private:
  friend class ExecutionContext;
  void execution_started(ExecutionContext& execution);
  Status execution_finished(ExecutionContext& execution);

  const std::string device_;
  Registry& registry_;
  std::shared_ptr<hal::Device> host_device_;
  std::mutex create_mutex_;  // serializes factories, so each resource is made once
  std::mutex mutex_;         // guards resources_, order_ and finished_; never held while calling out
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources_;
  std::vector<Resource*> order_;  // creation order, for the hooks
  bool finished_ = false;
};

}  // namespace kiln::ral
