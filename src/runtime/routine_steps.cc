#include "runtime/routine_steps.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <span>

#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/ir/call.h"
#include "kiln/ral/world.h"

namespace kiln::runtime {

uint32_t dispatch_workgroups(const ir::Kernel& kernel, const hal::DeviceCapabilities& caps, uint32_t fixed) {
  if (fixed) return static_cast<uint32_t>(std::min<int64_t>(codegen::max_workgroups(kernel), fixed));
  const uint64_t cap = uint64_t{std::max(1u, caps.compute_units)} * std::max(1u, caps.workgroups_per_compute_unit);
  return codegen::workgroups_for_size(kernel, static_cast<uint32_t>(std::min<uint64_t>(cap, INT32_MAX)),
                                      caps.min_stores_per_workgroup);
}

Result<std::vector<std::shared_ptr<const ral::BoundCall>>> bind_routine_calls(
    const ir::LoweredRoutine& routine, const ir::Program& program, const hal::Device& device) {
  std::vector<std::shared_ptr<const ral::BoundCall>> bound;
  for (const ir::LoweredCall& c : routine.calls) {
    Result<ral::BoundCall> b =
        ral::BoundCall::bind(c.call, program, c.call_site, device.info().driver, ral::Registry::global());
    if (!b.ok()) {
      return b.status().annotate("routine '" + routine.name + "'" +
                                 (c.call.loc.line ? ", line " + std::to_string(c.call.loc.line) : std::string()));
    }
    if (b->collective()) {
      const std::string where = "routine '" + routine.name + "'";
      Result<ral::World*> world = ral::world();
      if (!world.ok()) return world.status().annotate(where);
      for (const ir::Diagnostic& d : ir::check_collective_ranks(c.call, program.nodes, (*world)->size())) {
        return invalid_argument_error(where + ", line " + std::to_string(d.loc.line) + ": " + d.message);
      }
    }
    bound.push_back(std::make_shared<const ral::BoundCall>(std::move(*b)));
  }
  return bound;
}

Result<std::vector<RoutineStep>> make_routine_steps(
    const hal::Device& device, const RoutineShape& routine,
    const std::vector<std::shared_ptr<const ral::BoundCall>>& calls,
    const std::optional<CallKernels>& call_kernels,
    const std::function<Result<hal::DispatchCommand>(size_t kernel)>& dispatch,
    const std::function<Result<hal::BufferRef>(int node)>& buffer) {
  if (calls.size() != routine.calls.size()) {
    return internal_error("routine '" + std::string(routine.name) + "' has " + std::to_string(routine.calls.size()) +
                          " calls, " + std::to_string(calls.size()) + " bound");
  }
  std::vector<RoutineStep> steps;
  std::shared_ptr<hal::CommandBuffer> recording;
  bool calls_runtime = false;
  // Dispatches in one command buffer, a barrier between each two.
  auto record = [&](hal::DispatchCommand d) -> Status {
    if (recording) {
      KILN_RETURN_IF_ERROR(recording->barrier());
    } else {
      recording = hal::CommandBuffer::create(device.tag());
    }
    return recording->dispatch(std::move(d));
  };
  auto close = [&]() -> Status {
    if (!recording) return Status();
    KILN_RETURN_IF_ERROR(recording->finalize());
    steps.emplace_back(KernelStep{std::move(recording), calls_runtime});
    recording.reset();
    calls_runtime = false;
    return Status();
  };
  size_t kernel = 0;
  auto add_kernels = [&](size_t until) -> Status {
    for (; kernel < until; ++kernel) {
      KILN_ASSIGN_OR_RETURN(hal::DispatchCommand d, dispatch(kernel));
      KILN_RETURN_IF_ERROR(record(std::move(d)));
    }
    return Status();
  };
  for (size_t c = 0; c < calls.size(); ++c) {
    KILN_RETURN_IF_ERROR(add_kernels(std::min(routine.calls[c].after_kernels, routine.kernels)));
    const int line = routine.calls[c].call.loc.line;
    CallStep step{calls[c], {}, "routine '" + std::string(routine.name) + "'" + (line ? ", line " + std::to_string(line) : "")};
    for (int node : calls[c]->tensors()) {
      KILN_ASSIGN_OR_RETURN(hal::BufferRef b, buffer(node));
      step.buffers.push_back(std::move(b));
    }
    if (call_kernels && !calls[c]->collective()) {
      hal::DispatchCommand d;
      d.executable = call_kernels->executable;
      d.export_ordinal = call_kernels->first_ordinal + static_cast<uint32_t>(c);
      d.constants = call_kernels->constants;
      for (hal::BufferRef& b : step.buffers) d.bindings.push_back({std::move(b)});
      KILN_RETURN_IF_ERROR(record(std::move(d)));
      calls_runtime = true;
    } else {
      KILN_RETURN_IF_ERROR(close());
      steps.emplace_back(std::move(step));
    }
  }
  KILN_RETURN_IF_ERROR(add_kernels(routine.kernels));
  KILN_RETURN_IF_ERROR(close());
  return steps;
}

namespace {

// The execution context of one run, with the RAL context it belongs to (destroyed after it);
// call kernels receive it as their dispatch context.
struct Execution final : hal::DispatchContext {
  std::shared_ptr<ral::Context> ral;
  std::unique_ptr<ral::ExecutionContext> context;

  void* abi() override { return context->abi(); }
  Status failure() const override { return context->status(); }
};

bool needs_execution(const RoutineStep& step) {
  if (std::holds_alternative<HostStep>(step)) return false;
  const auto* kernels = std::get_if<KernelStep>(&step);
  return !kernels || kernels->calls_runtime;
}

// A call's data on the queue's host thread: its buffers mapped (read for arguments, read-write
// for outputs: gemm's beta reads c) and their addresses, or the buffers themselves for a function
// that works on device memory (ral::Memory::kDevice, kDeviceStream).
Status map_call(const CallStep& step, std::vector<hal::Mapping>& mappings, std::vector<void*>& data) {
  const ral::BoundCall& call = *step.call;
  for (size_t i = 0; i < step.buffers.size(); ++i) {
    if (call.memory() != ral::Memory::kHost) {
      data.push_back(step.buffers[i].get());
      continue;
    }
    const hal::MapAccess access = call.is_output(i) ? hal::MapAccess::kReadWrite : hal::MapAccess::kRead;
    Result<hal::Mapping> m = step.buffers[i]->map(access);
    if (!m.ok()) return m.status().annotate("call " + call.function() + ": mapping its tensors");
    data.push_back(m->data());
    mappings.push_back(std::move(*m));
  }
  return Status();
}

// Runs a call that is not a collective: it has finished when it returns.
Status run_call(const CallStep& step, Execution& execution) {
  std::vector<hal::Mapping> mappings;
  std::vector<void*> data;
  KILN_RETURN_IF_ERROR(map_call(step, mappings, data));
  return step.call->invoke(*execution.context, data);
}

// Invokes a collective call: it is offered a completion that releases the mappings and then calls
// `ended`, and that gathers the collective into `gathered` for the caller to start; when it takes
// it the result is kDeferred, and `ended` runs once the other ranks have taken part. Otherwise it
// ended (or failed) before returning.
Status gather_collective(const CallStep& step, Execution& execution, const RoutineRun& run,
                         std::function<void(Status)> ended, std::vector<ral::World::Started>& gathered) {
  const ral::BoundCall& call = *step.call;
  std::vector<hal::Mapping> mappings;
  std::vector<void*> data;
  KILN_RETURN_IF_ERROR(map_call(step, mappings, data));
  std::shared_ptr<Trace> trace = run.trace;
  Trace::Event event;
  if (trace) {
    event = {call.function(), "collective", "collectives of " + run.stream, kCollectiveTrack + run.stream_ordinal,
             now_ns(), 0, {}};
  }
  // The completion owns the mappings (a std::function must be copyable: through a shared_ptr).
  auto held = std::make_shared<std::vector<hal::Mapping>>(std::move(mappings));
  execution.context->offer_completion({[held, ended = std::move(ended), trace, event](Status outcome) mutable {
                                         held->clear();  // written back before anyone reads
                                         if (trace) {
                                           event.end_ns = now_ns();
                                           trace->record(std::move(event));
                                         }
                                         ended(std::move(outcome));
                                       },
                                       step.site,
                                       [&gathered](ral::Collective c, std::function<void(Status)> done) {
                                         gathered.push_back({std::move(c), std::move(done)});
                                       }});
  Status invoked = call.invoke(*execution.context, data);
  if (execution.context->take_completion() || !invoked.ok()) return invoked;
  return Status(StatusCode::kDeferred, "call " + call.function() + " ends when the other ranks take part");
}

// Collectives started together by one host call: the last to end completes the step's signals,
// with the first failure if any.
struct CollectiveGroup {
  CollectiveGroup(size_t count, hal::SemaphoreList s) : left(count), signals(std::move(s)) {}
  void end(Status outcome) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (first_failure.ok()) first_failure = std::move(outcome);
    }
    if (left.fetch_sub(1) == 1) hal::Queue::complete(signals, first_failure);
  }

  std::atomic<size_t> left;
  std::mutex mutex;
  Status first_failure;
  hal::SemaphoreList signals;
};

// Starts `calls` (collectives, in order: every rank starts them in the same order) together
// (World::start_all, which sends small allreduces as one) and returns kDeferred: the group ends
// the step. After a call that fails to start, the rest are not started.
Status run_collectives(std::span<const CallStep> calls, Execution& execution, const hal::SemaphoreList& signals,
                       const RoutineRun& run) {
  auto group = std::make_shared<CollectiveGroup>(calls.size(), signals);
  std::vector<ral::World::Started> gathered;
  Status failed;
  for (const CallStep& c : calls) {
    if (!failed.ok()) {
      group->end(failed.annotate("call " + c.call->function() + " not started"));
      continue;
    }
    Status started =
        gather_collective(c, execution, run, [group](Status outcome) { group->end(std::move(outcome)); }, gathered);
    if (started.code() == StatusCode::kDeferred) continue;
    failed = started;
    group->end(std::move(started));  // it ended before returning (or never started)
  }
  if (gathered.empty()) return Status(StatusCode::kDeferred, "collectives end when the other ranks take part");
  // The functions found the world before gathering: this cannot fail now.
  Result<ral::World*> world = ral::world();
  if (!world.ok()) {
    for (ral::World::Started& s : gathered) s.done(world.status());
  } else {
    (*world)->start_all(std::move(gathered));
  }
  return Status(StatusCode::kDeferred, "collectives end when the other ranks take part");
}

// Whether step `s` is a collective call over host memory (the world's; a collective on a
// device's own memory, cuda's over NCCL, runs as a stream call) that can start with those of
// `group` (steps already taken): it reads nothing they write and writes nothing they touch.
bool joins_collectives(const RoutineStep& s, std::span<const RoutineStep> group) {
  const auto* call = std::get_if<CallStep>(&s);
  if (!call || !call->call->collective() || call->call->memory() != ral::Memory::kHost) return false;
  for (const RoutineStep& g : group) {
    const auto& other = std::get<CallStep>(g);
    for (size_t i = 0; i < call->buffers.size(); ++i) {
      for (size_t j = 0; j < other.buffers.size(); ++j) {
        const bool writes = call->call->is_output(i) || other.call->is_output(j);
        if (writes && call->buffers[i]->overlaps(*other.buffers[j])) return false;
      }
    }
  }
  return true;
}

}  // namespace

Status submit_routine_steps(hal::Device& device, hal::Queue& queue, const hal::SemaphoreList& waits,
                            const hal::SemaphoreList& signals, const std::vector<RoutineStep>& steps,
                            const RoutineRun& run) {
  if (steps.empty()) return queue.barrier(waits, signals);
  std::shared_ptr<Execution> execution;
  for (const RoutineStep& s : steps) {
    if (needs_execution(s) && !execution) {
      if (!run.ral) return internal_error("a routine with calls runs without a RAL context");
      execution = std::make_shared<Execution>();
      execution->ral = run.ral;
      execution->context = std::make_unique<ral::ExecutionContext>(*run.ral, run.seed, run.run);
    }
  }
  // What each host call or execution submits: one step, or consecutive collectives started
  // together (one hand-off to the progress thread for all of them instead of one each), from
  // steps[i] to the step before submission_end(i).
  auto submission_end = [&](size_t i) {
    size_t end = i + 1;
    if (joins_collectives(steps[i], {})) {
      while (end < steps.size() && joins_collectives(steps[end], std::span(steps).subspan(i, end - i))) ++end;
    }
    return end;
  };
  size_t count = 0;
  for (size_t i = 0; i < steps.size(); i = submission_end(i)) ++count;
  // Submissions after the first wait on the one before through `order`; only the last signals.
  std::shared_ptr<hal::Semaphore> order = count > 1 ? device.create_semaphore(0) : nullptr;
  for (size_t k = 0, i = 0; k < count; ++k) {
    const size_t end = submission_end(i);
    const std::span<const RoutineStep> submission = std::span(steps).subspan(i, end - i);
    i = end;
    // Lists of their own only between submissions: a routine of one submits the caller's.
    hal::SemaphoreList waits_between, signals_between;
    if (k > 0) waits_between = {{order, k}};
    if (k + 1 < count) signals_between = {{order, k + 1}};
    const hal::SemaphoreList& step_waits = k == 0 ? waits : waits_between;
    const hal::SemaphoreList& step_signals = k + 1 == count ? signals : signals_between;
    const RoutineStep& first = submission.front();
    Status submitted;
    if (const auto* kernels = std::get_if<KernelStep>(&first)) {
      submitted = queue.execute(step_waits, step_signals, kernels->command_buffer,
                                kernels->calls_runtime ? execution : nullptr,
                                count == 1 ? run.placement : hal::Placement::kQueued);
    } else if (const auto* host = std::get_if<HostStep>(&first)) {
      submitted = queue.host_call(step_waits, step_signals,
                                  [fn = host->fn](const hal::SemaphoreList&) { return fn(); });
    } else if (joins_collectives(first, {})) {
      std::vector<CallStep> calls;
      for (const RoutineStep& c : submission) calls.push_back(std::get<CallStep>(c));
      // Collectives that can start at once start on this thread: they hand what does not end
      // within a few round trips to the world's progress thread (ral/mpi_collectives.h).
      submitted = queue.host_call(step_waits, step_signals,
                                  [calls = std::move(calls), execution, run](const hal::SemaphoreList& signals) {
                                    return run_collectives(calls, *execution, signals, run);
                                  },
                                  k == 0 ? hal::Placement::kCallerWhenReady : hal::Placement::kQueued);
    } else if (const auto& step = std::get<CallStep>(first); step.call->memory() == ral::Memory::kDeviceStream) {
      // A function that queues device work (a collective on cuda's memory among them): on a
      // queue with a stream of its own, in the stream's order, with nothing on the host waiting
      // for it (hal::StreamCallFn).
      submitted = queue.stream_call(
          step_waits, step_signals, [step, execution](const hal::SemaphoreList&) { return run_call(step, *execution); },
          [step, execution](void* stream) {
            execution->context->set_device_stream(stream);
            Status status = run_call(step, *execution);
            execution->context->set_device_stream(nullptr);
            return status;
          });
    } else {
      submitted = queue.host_call(step_waits, step_signals,
                                  [step, execution](const hal::SemaphoreList&) { return run_call(step, *execution); });
    }
    if (!submitted.ok()) {
      // Steps already submitted wait on `order`: fail it so they end (with this status).
      if (order) order->fail(submitted);
      return submitted;
    }
  }
  return Status();
}

}  // namespace kiln::runtime
