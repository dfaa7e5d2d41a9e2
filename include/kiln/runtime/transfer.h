// Transfers between the host and devices and between contexts, scheduled on streams with the
// same per-node synchronization as routines. Each returns at once with whether there was
// anything to move.
#pragma once

#include <string_view>

#include "kiln/base/status.h"
#include "kiln/runtime/context.h"

namespace kiln::runtime {

// Host copy → the context tree's array of `node`, on the context's stream. The bytes are taken
// when it is scheduled (later host writes do not change what it uploads). false when the array
// already holds the host's data (nothing stale). NOT_FOUND when the tree has no array for it.
Result<bool> from_host(const ContextRef& context, std::string_view node);

// The context tree's array → the host copy, on the context's stream. false when the host copy
// is already current. Tensor::read waits for it.
Result<bool> to_host(const ContextRef& context, std::string_view node);

enum class MergeMode {
  kNo,         // into dst's own array of the node
  kCopy,       // into dst's stream's merge buffer (grown as needed)
  kStreaming,  // dst's routines read src's array directly (same device); else like kCopy
};

// src's array of `node` → dst (see MergeMode), scheduled on dst's stream after src's last
// writer. Across devices the data is staged through host memory. false when dst and src share
// one array (kNo): nothing to move. NOT_FOUND when either tree lacks the node.
Result<bool> device_to_device(std::string_view node, MergeMode into_merge_buffer,
                              const ContextRef& dst, const ContextRef& src);

}  // namespace kiln::runtime
