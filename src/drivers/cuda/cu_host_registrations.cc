#include "drivers/cuda/cu_host_registrations.h"

namespace kiln::cuda {

std::map<uintptr_t, HostRegistrations::Range>::iterator HostRegistrations::find(uintptr_t host, size_t size) {
  auto it = ranges_.upper_bound(host);
  if (it == ranges_.begin()) return ranges_.end();
  --it;  // the last range starting at or before host
  return host - it->first + size <= it->second.size ? it : ranges_.end();
}

std::optional<CUdeviceptr> HostRegistrations::share(const void* host, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto start = reinterpret_cast<uintptr_t>(host);
  auto it = find(start, size);
  if (it == ranges_.end()) return std::nullopt;
  ++it->second.users;
  return it->second.device + (start - it->first);
}

void HostRegistrations::add(const void* host, size_t size, CUdeviceptr device) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[reinterpret_cast<uintptr_t>(host)] = Range{size, device, 1};
}

void* HostRegistrations::release(const void* host) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = find(reinterpret_cast<uintptr_t>(host), 0);
  if (it == ranges_.end() || --it->second.users > 0) return nullptr;
  void* start = reinterpret_cast<void*>(it->first);
  ranges_.erase(it);
  return start;
}

}  // namespace kiln::cuda
