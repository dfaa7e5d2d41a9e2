// Routines as CUDA graphs: the kernels of an execute action (a command buffer of dispatches) are
// replayed as one instantiated graph (cuGraphLaunch) instead of a launch each, as IREE's CUDA HAL
// records its command buffers. Graphs are kept by the kernels they run, in order: the second time
// a sequence of kernels runs, its graph is instantiated (a routine run once pays for none); later
// runs whose parameters differ (the routine's buffers moved, as when it is recorded again for
// another binding, or its workgroup counts changed: sizes) update the nodes that changed
// (cuGraphExecKernelNodeSetParams, which leaves launches already queued as they were) and launch.
//
// A caller may rely on: launch() puts the kernels on the stream in order, as a graph or not at
// all (then the caller launches them). At most kMaxGraphs sequences are kept, the least recently
// run dropped first (CUDA frees an instance still running once it ends). Not thread-safe: CuQueue
// calls it under its issue lock, with the context pushed.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "kiln/base/status.h"

namespace kiln::cuda {

// One kernel launch: the function, its grid and block, and its parameters in 64-bit slots (a
// 32-bit parameter in the low bytes, as cuLaunchKernel reads it).
struct KernelLaunch {
  CUfunction function = nullptr;
  std::array<unsigned, 3> grid = {1, 1, 1};
  unsigned block = 1;
  std::vector<uint64_t> values;

  // A pointer to each value, as cuLaunchKernel and a graph's kernel node take the parameters
  // (they copy them before returning); valid while the launch is.
  std::vector<void*> parameters() const {
    std::vector<void*> out;
    for (const uint64_t& v : values) out.push_back(const_cast<uint64_t*>(&v));
    return out;
  }
  bool operator==(const KernelLaunch&) const = default;
};

class GraphCache {
 public:
  // Sequences of kernels kept at most, run once or instantiated.
  static constexpr size_t kMaxGraphs = 64;

  explicit GraphCache(const Api& api) : api_(api) {}
  ~GraphCache() { clear(); }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Whether the driver has graphs and KILN_CUDA_GRAPHS does not turn them off (read once).
  bool enabled() const;

  // Launches `launches` in order on `stream` as the graph of their kernels where they ran before;
  // false when they have not (the caller launches them). The failing call's error otherwise.
  Result<bool> launch(const std::vector<KernelLaunch>& launches, CUstream stream);

  // Destroys every graph, with the context pushed.
  void clear();

 private:
  struct Entry {
    uint64_t last_run = 0;
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<CUgraphNode> nodes;
    std::vector<KernelLaunch> current;  // what the instance's nodes hold
  };
  using Key = std::vector<CUfunction>;
  Status instantiate(Entry& entry, const std::vector<KernelLaunch>& launches);
  void destroy(Entry& entry);

  const Api& api_;
  std::map<Key, Entry> entries_;
  uint64_t runs_ = 0;
};

}  // namespace kiln::cuda
