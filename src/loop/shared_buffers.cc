// Shared buffers of a routine's intermediates (shared_buffers.h).
#include "loop/shared_buffers.h"

#include <algorithm>
#include <map>

#include "kiln/ir/call.h"
#include "loop/overwrite.h"

namespace kiln::ir::lowering {
namespace {

int64_t aligned(int64_t bytes) {
  return (bytes + kSharedBufferAlignment - 1) / kSharedBufferAlignment * kSharedBufferAlignment;
}

bool passes(const Call& call, int node) {
  return std::any_of(call.args.begin(), call.args.end(), [&](const CallArg& a) { return a.node == node; });
}

// Whether `node` may share plan `r`'s buffer (shared_buffers.h), apart from its lifetime.
bool shareable(const Program& requested, const Program& decided, const std::vector<RoutinePlan>& plans,
               const NodeUses& uses, size_t r, int node) {
  const TensorNode& n = decided.nodes[static_cast<size_t>(node)];
  if (n.role != Role::kTensor || n.memory != MemoryMode::kOnDevice) return false;
  if (requested.nodes[static_cast<size_t>(node)].memory != MemoryMode::kUnset) return false;
  bool read = false;
  const NodeUse* first = nullptr;
  if (auto it = uses.find(node); it != uses.end()) {
    for (const NodeUse& u : it->second) {
      if (u.routine != r || u.merge) return false;
      if (!first) first = &u;
      read = read || u.reads;
    }
  }
  const Call* first_call = nullptr;
  for (size_t p = 0; p < plans.size(); ++p) {
    for (const Call& call : plans[p].routine->calls) {
      const bool args = passes(call, node);
      if (!args && std::find(call.outputs.begin(), call.outputs.end(), node) == call.outputs.end()) continue;
      if (p != r) return false;
      if (!first_call) first_call = &call;
      read = read || args;
    }
  }
  if (!read) return false;
  // A call runs before the statement at its position.
  if (first_call && (!first || static_cast<size_t>(first_call->position) <= first->statement)) {
    return !passes(*first_call, node);
  }
  return first && first->writes && !first->reads &&
         fully_overwritten(plans[r].routine->statements[first->statement]);
}

}  // namespace

std::vector<SharedNode> plan_shared_buffer(const Program& requested, const Program& decided,
                                           const std::vector<RoutinePlan>& plans, const NodeUses& uses, size_t routine,
                                           const LoweredRoutine& lowered) {
  std::map<int, SharedNode> lives;
  size_t action = 0;
  auto touch = [&](int node) {
    if (node < 0 || static_cast<size_t>(node) >= requested.nodes.size()) return;  // hidden nodes
    lives.try_emplace(node, SharedNode{node, action, action}).first->second.last = action;
  };
  size_t next_call = 0;
  for (size_t k = 0; k <= lowered.kernels.size(); ++k) {
    for (; next_call < lowered.calls.size() && lowered.calls[next_call].after_kernels <= k; ++next_call, ++action) {
      for (int node : call_tensors(lowered.calls[next_call].call)) touch(node);
    }
    if (k == lowered.kernels.size()) break;
    for (int node : lowered.kernels[k].nodes) touch(node);
    ++action;
  }
  std::vector<SharedNode> shared;
  for (const auto& [node, life] : lives) {
    if (shareable(requested, decided, plans, uses, routine, node)) shared.push_back(life);
  }
  // Worth a buffer only where two of them could share bytes.
  for (size_t i = 0; i < shared.size(); ++i) {
    for (size_t j = i + 1; j < shared.size(); ++j) {
      if (shared[i].last < shared[j].first || shared[j].last < shared[i].first) return shared;
    }
  }
  return {};
}

}  // namespace kiln::ir::lowering

namespace kiln::ir {

SharedLayout layout_shared_buffer(const std::vector<SharedNode>& nodes, const std::vector<int64_t>& bytes) {
  std::vector<size_t> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  SharedLayout layout;
  layout.offsets.assign(nodes.size(), 0);
  std::vector<size_t> overlapping;  // placed nodes whose lifetimes overlap the one being placed
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t n = order[i];
    overlapping.clear();
    for (size_t j = 0; j < i; ++j) {
      const size_t m = order[j];
      if (nodes[m].first <= nodes[n].last && nodes[n].first <= nodes[m].last) overlapping.push_back(m);
    }
    std::sort(overlapping.begin(), overlapping.end(),
              [&](size_t a, size_t b) { return layout.offsets[a] < layout.offsets[b]; });
    int64_t offset = 0;
    for (size_t m : overlapping) {
      if (layout.offsets[m] + bytes[m] <= offset) continue;
      if (offset + bytes[n] <= layout.offsets[m]) break;
      offset = lowering::aligned(layout.offsets[m] + bytes[m]);
    }
    layout.offsets[n] = offset;
    layout.bytes = std::max(layout.bytes, offset + bytes[n]);
  }
  return layout;
}

}  // namespace kiln::ir
