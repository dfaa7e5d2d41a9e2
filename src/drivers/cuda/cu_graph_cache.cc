#include "drivers/cuda/cu_graph_cache.h"

#include <string>

#include "kiln/base/log.h"
#include "kiln/base/settings.h"

namespace kiln::cuda {

namespace {

// The node parameters of `launch`, whose kernelParams point into `pointers` (one per value).
CUDA_KERNEL_NODE_PARAMS node_params(const KernelLaunch& launch, std::vector<void*>& pointers) {
  pointers = launch.parameters();
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = launch.function;
  p.gridDimX = launch.grid[0];
  p.gridDimY = launch.grid[1];
  p.gridDimZ = launch.grid[2];
  p.blockDimX = launch.block;
  p.blockDimY = 1;
  p.blockDimZ = 1;
  p.kernelParams = pointers.data();
  return p;
}

}  // namespace

void GraphCache::clear() {
  for (auto& [key, entry] : entries_) destroy(entry);
  entries_.clear();
}

bool GraphCache::enabled() const {
  static const bool on = [] {
    Result<std::optional<std::string>> asked = setting_choice("KILN_CUDA_GRAPHS");
    if (!asked.ok()) {
      KILN_LOG(kWarn, asked.status().message() + "; routines run without graphs");
      return false;
    }
    return !*asked || **asked == "on";
  }();
  return on && api_.has_graphs();
}

Result<bool> GraphCache::launch(const std::vector<KernelLaunch>& launches, CUstream stream) {
  Key key;
  for (const KernelLaunch& launch : launches) key.push_back(launch.function);
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    if (entries_.size() >= kMaxGraphs) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.last_run < oldest->second.last_run) oldest = it;
      }
      destroy(oldest->second);
      entries_.erase(oldest);
    }
    entries_[key].last_run = ++runs_;  // its first run
    return false;
  }
  Entry& entry = found->second;
  entry.last_run = ++runs_;
  if (!entry.exec) {
    if (Status made = instantiate(entry, launches); !made.ok()) {
      destroy(entry);
      entries_.erase(found);
      return made;
    }
  } else {
    std::vector<void*> pointers;
    for (size_t i = 0; i < launches.size(); ++i) {
      if (launches[i] == entry.current[i]) continue;
      const CUDA_KERNEL_NODE_PARAMS p = node_params(launches[i], pointers);
      if (CUresult set = api_.GraphExecKernelNodeSetParams(entry.exec, entry.nodes[i], &p); set != CUDA_SUCCESS) {
        return cu_error("cuGraphExecKernelNodeSetParams_v2", set);
      }
      entry.current[i] = launches[i];
    }
  }
  if (CUresult launched = api_.GraphLaunch(entry.exec, stream); launched != CUDA_SUCCESS) {
    return cu_error("cuGraphLaunch", launched);
  }
  return true;
}

Status GraphCache::instantiate(Entry& entry, const std::vector<KernelLaunch>& launches) {
  if (CUresult made = api_.GraphCreate(&entry.graph, 0); made != CUDA_SUCCESS) return cu_error("cuGraphCreate", made);
  std::vector<void*> pointers;
  for (const KernelLaunch& launch : launches) {
    // Each node after the one before: the command buffer's kernels run in order.
    const CUDA_KERNEL_NODE_PARAMS p = node_params(launch, pointers);
    CUgraphNode node = nullptr;
    const CUgraphNode* before = entry.nodes.empty() ? nullptr : &entry.nodes.back();
    if (CUresult added = api_.GraphAddKernelNode(&node, entry.graph, before, before ? 1 : 0, &p); added != CUDA_SUCCESS) {
      return cu_error("cuGraphAddKernelNode_v2", added);
    }
    entry.nodes.push_back(node);
  }
  if (CUresult made = api_.GraphInstantiate(&entry.exec, entry.graph, 0); made != CUDA_SUCCESS) {
    entry.exec = nullptr;
    return cu_error("cuGraphInstantiateWithFlags", made);
  }
  entry.current = launches;
  return Status();
}

void GraphCache::destroy(Entry& entry) {
  if (entry.exec) api_.GraphExecDestroy(entry.exec);
  if (entry.graph) api_.GraphDestroy(entry.graph);
  entry.exec = nullptr;
  entry.graph = nullptr;
}

}  // namespace kiln::cuda
