// Where a CPU device's queue threads run. Each queue has one thread, and two busy queue threads
// left to the system's scheduler can end up taking turns on one core while another idles: a
// thread that ran within the last half millisecond counts as cache-hot and is not moved, and
// queue threads run every few microseconds. Once a device has a second queue, its queue threads
// are pinned round-robin over the cores the process may run on (sched_getaffinity), in the
// order the queues were created; a device's only queue stays where the system puts it, so that
// one-queue processes sharing a machine (MPI ranks) do not all land on the first core.
// KILN_CPU_AFFINITY=none leaves every queue thread to the system.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::cpu {

class CpuQueue;

class QueueCores {
 public:
  // The cores the calling thread may run on (the process's, unless it narrowed its own).
  QueueCores();

  // Places a new queue's thread (see above). INVALID_ARGUMENT when KILN_CPU_AFFINITY is neither
  // `spread` nor `none`; a core the system refuses leaves that thread unpinned (placement is a
  // matter of speed, never of what runs).
  Status place(const std::shared_ptr<CpuQueue>& queue);

  // The cores queue threads are spread over, in order.
  const std::vector<int>& cores() const { return cores_; }

 private:
  std::vector<int> cores_;
  std::mutex mutex_;
  uint32_t placed_ = 0;                // guarded by mutex_
  std::weak_ptr<CpuQueue> first_;      // guarded by mutex_: pinned when a second queue comes
};

}  // namespace kiln::cpu
