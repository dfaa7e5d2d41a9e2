// The bridge from HAL semaphores to cl_events.
//
// When an action is enqueued, its completion event is published here for each (semaphore,
// value) it will signal, provided that the event completing successfully means the action
// succeeded (actions with dispatches are checked on the host afterwards and are not published).
// A later device wait on (semaphore, v) then finds the published event of the smallest value
// >= v and becomes an entry of the OpenCL event wait list, with no host round trip. Waits that
// are not published (host signals, signals not yet submitted, other devices) are held in the
// HAL's DeferredQueue instead. Entries are retracted by the completion callback, after the
// semaphores were signalled, so a wait that misses the entry sees the value reached.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "drivers/opencl/cl_api.h"
#include "kiln/hal/semaphore.h"

namespace kiln::opencl {

class EventBridge {
 public:
  explicit EventBridge(const Api& api) : api_(api) {}
  ~EventBridge();

  // Publishes `event` (retained once per entry) as the signal of each pair.
  void publish(const hal::SemaphoreList& signals, cl_event event);
  // Removes (and releases) what publish() added for `event`.
  void retract(const hal::SemaphoreList& signals, cl_event event);

  enum class Wait { kMet, kEvent, kHost };
  // kMet: already reached. kEvent: a retained event was appended to `events` (the caller
  // releases it). kHost: only the host can tell (failed, unpublished): use the deferred queue.
  Wait resolve(const hal::SemaphoreValue& wait, std::vector<cl_event>* events);

 private:
  struct Entry {
    uint64_t value;
    cl_event event;
  };
  const Api& api_;
  std::mutex mutex_;
  std::unordered_map<const hal::Semaphore*, std::vector<Entry>> published_;  // guarded by mutex_
};

}  // namespace kiln::opencl
