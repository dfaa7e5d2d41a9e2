// Where a CPU device's queue threads run. Each queue has one thread, and two busy queue threads
// left to the system's scheduler can end up taking turns on one core while another idles: a
// thread that ran within the last half millisecond counts as cache-hot and is not moved, and
// queue threads run every few microseconds. Spreading (DeviceOptions::spread_queues, else
// KILN_CPU_AFFINITY=spread) pins them round-robin over the cores the creating thread may run on
// (sched_getaffinity), in the order the queues were created, once the device has a second queue;
// a device's only queue stays where the system puts it. Off by default: a pinned thread cannot
// move away from another busy thread on its core (another library's spinning workers).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::cpu {

class CpuQueue;

class QueueCores {
 public:
  // The cores the calling thread may run on (the process's, unless it narrowed its own);
  // `spread`: DeviceOptions::spread_queues (unset: KILN_CPU_AFFINITY decides at each queue).
  explicit QueueCores(std::optional<bool> spread);

  // Places a new queue's thread (see above). INVALID_ARGUMENT when KILN_CPU_AFFINITY decides and
  // is neither `spread` nor `none`; a core the system refuses leaves that thread unpinned
  // (placement is a matter of speed, never of what runs).
  Status place(const std::shared_ptr<CpuQueue>& queue);

 private:
  std::vector<int> cores_;  // in order, what spread queue threads are pinned to
  const std::optional<bool> spread_;
  std::mutex mutex_;
  uint32_t placed_ = 0;                // guarded by mutex_
  std::weak_ptr<CpuQueue> first_;      // guarded by mutex_: pinned when a second queue comes
};

}  // namespace kiln::cpu
