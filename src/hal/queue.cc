#include "kiln/hal/queue.h"

#include <string>

#include "hal/deferred_queue.h"

namespace kiln::hal {

Queue::Queue(std::string name, const void* device_tag)
    : deferred_(std::make_unique<DeferredQueue>(
          [this](std::unique_ptr<Action> action) { issue(std::move(action)); })),
      name_(std::move(name)),
      device_tag_(device_tag) {}

Queue::~Queue() = default;

void Queue::defer(std::unique_ptr<Action> action) { deferred_->submit(std::move(action)); }

void Queue::abort_pending() {
  deferred_->abort_all(cancelled_error("queue '" + name_ + "' destroyed while the action waited"));
}

static Status check_semaphores(const SemaphoreList& list, const char* which) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].semaphore) {
      return invalid_argument_error(std::string(which) + " list entry " + std::to_string(i) +
                                    " has no semaphore");
    }
  }
  return Status();
}

Status Queue::submit(Command command, const SemaphoreList& waits, const SemaphoreList& signals,
                     Placement placement) {
  Status status = check_semaphores(waits, "wait");
  if (status.ok()) status = check_semaphores(signals, "signal");
  if (status.ok()) status = validate_command(command, device_tag_);
  if (!status.ok()) return status.annotate("queue '" + name_ + "'");
  auto action = std::make_unique<Action>(Action{std::move(command), waits, signals, placement});
  enqueue(std::move(action));
  return Status();
}

void Queue::complete(const Action& action, const Status& status) { complete(action.signals, status); }

void Queue::complete(const SemaphoreList& signals, const Status& status) {
  if (!status.ok()) {
    fail_semaphores(signals, status);
    return;
  }
  for (const SemaphoreValue& signal : signals) {
    Status signalled = signal.semaphore->signal(signal.value);
    // A signal that cannot be applied is a broken timeline: fail it so its waiters learn why.
    if (!signalled.ok() && signalled.code() == StatusCode::kInvalidArgument) {
      signal.semaphore->fail(signalled);
    }
  }
}

Status Queue::copy(const SemaphoreList& waits, const SemaphoreList& signals,
                   const BufferRef& source, size_t source_offset, const BufferRef& target,
                   size_t target_offset, size_t length, Placement placement) {
  return submit(CopyCommand{source, source_offset, target, target_offset, length}, waits, signals, placement);
}

Status Queue::fill(const SemaphoreList& waits, const SemaphoreList& signals,
                   const BufferRef& target, size_t offset, size_t length, const void* pattern,
                   size_t pattern_size, Placement placement) {
  Result<FillCommand> fill = make_fill(target, offset, length, pattern, pattern_size);
  if (!fill.ok()) return fill.status().annotate("queue '" + name_ + "'");
  return submit(std::move(*fill), waits, signals, placement);
}

Status Queue::update(const SemaphoreList& waits, const SemaphoreList& signals, const void* source,
                     const BufferRef& target, size_t offset, size_t length, Placement placement) {
  Result<UpdateCommand> update = make_update(source, target, offset, length);
  if (!update.ok()) return update.status().annotate("queue '" + name_ + "'");
  return submit(std::move(*update), waits, signals, placement);
}

Status Queue::read(const SemaphoreList& waits, const SemaphoreList& signals,
                   const BufferRef& source, size_t offset, void* target, size_t length,
                   Placement placement) {
  return submit(ReadCommand{source, offset, target, length}, waits, signals, placement);
}

Status Queue::write(const SemaphoreList& waits, const SemaphoreList& signals, const void* source,
                    const BufferRef& target, size_t offset, size_t length, Placement placement) {
  return submit(WriteCommand{source, target, offset, length}, waits, signals, placement);
}

Status Queue::dispatch(const SemaphoreList& waits, const SemaphoreList& signals,
                       DispatchCommand dispatch, Placement placement) {
  return submit(std::move(dispatch), waits, signals, placement);
}

Status Queue::execute(const SemaphoreList& waits, const SemaphoreList& signals,
                      std::shared_ptr<const CommandBuffer> command_buffer,
                      std::shared_ptr<DispatchContext> context, Placement placement) {
  return submit(ExecuteCommand{std::move(command_buffer), std::move(context)}, waits, signals, placement);
}

Status Queue::host_call(const SemaphoreList& waits, const SemaphoreList& signals, HostCallFn fn,
                        Placement placement) {
  return submit(HostCallCommand{std::move(fn), nullptr}, waits, signals, placement);
}

Status Queue::stream_call(const SemaphoreList& waits, const SemaphoreList& signals, HostCallFn fn,
                          StreamCallFn on_stream) {
  return submit(HostCallCommand{std::move(fn), std::move(on_stream)}, waits, signals);
}

Status Queue::barrier(const SemaphoreList& waits, const SemaphoreList& signals) {
  return submit(BarrierCommand{}, waits, signals);
}

}  // namespace kiln::hal
