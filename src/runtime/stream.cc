#include "kiln/runtime/stream.h"

#include "runtime/scheduler.h"
#include "runtime/stream_state.h"

namespace kiln::runtime {

Stream::Stream(hal::DeviceRef device, hal::QueueRef queue, std::string name, int ordinal)
    : device_(std::move(device)),
      queue_(std::move(queue)),
      timeline_(device_->create_semaphore(0)),
      name_(std::move(name)),
      ordinal_(ordinal),
      state_(std::make_unique<StreamState>()) {}

Stream::~Stream() = default;

Status Stream::await(Timeout timeout) const {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    last = state_->last;
  }
  Status status = timeline_->wait(last, timeout);
  if (!status.ok()) return status.annotate("stream '" + name_ + "'");
  return status;
}

Status Stream::wait_for(const std::shared_ptr<hal::Semaphore>& semaphore, uint64_t value) {
  if (!semaphore) return invalid_argument_error("stream '" + name_ + "': wait_for a null semaphore");
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return schedule(*this, {}, {{semaphore, value}}, {"wait_for", "sync"},
                  [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) { return queue_->barrier(w, s); })
      .status()
      .annotate("stream '" + name_ + "'");
}

bool Stream::is_idle() const {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    last = state_->last;
  }
  Result<uint64_t> value = timeline_->query();
  return !value.ok() || *value >= last;
}

}  // namespace kiln::runtime
