#include "drivers/cpu/queue_cores.h"

#include <sched.h>

#include <optional>
#include <string>

#include "drivers/cpu/cpu_queue.h"
#include "kiln/base/settings.h"

namespace kiln::cpu {

QueueCores::QueueCores(std::optional<bool> spread) : spread_(spread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;  // no list: nothing is pinned
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (CPU_ISSET(core, &set)) cores_.push_back(core);
  }
}

Status QueueCores::place(const std::shared_ptr<CpuQueue>& queue) {
  bool spread = spread_.value_or(false);
  if (!spread_) {
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> affinity, setting_choice("KILN_CPU_AFFINITY"));
    spread = affinity == "spread";
  }
  if (!spread || cores_.size() < 2) return Status();
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t index = placed_++;
  if (index == 0) {
    first_ = queue;
    return Status();
  }
  if (index == 1) {
    if (std::shared_ptr<CpuQueue> first = first_.lock()) first->pin_thread(cores_[0]);
    first_.reset();
  }
  queue->pin_thread(cores_[index % cores_.size()]);
  return Status();
}

}  // namespace kiln::cpu
