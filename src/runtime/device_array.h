// DeviceArray: the buffer of one node in one context tree (or shared by a device's streams),
// with the synchronization state that per-node scheduling keeps for it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/stream.h"

namespace kiln::runtime {

class DeviceArray {
 public:
  DeviceArray(NodeDesc desc, std::shared_ptr<Node> node, hal::BufferRef buffer, StreamRef home)
      : desc(std::move(desc)), node(std::move(node)), buffer(std::move(buffer)), home(std::move(home)) {}

  // Its shape and buffer: fixed, except for a node whose dimensions name sizes, which
  // fit_to_sizes_locked reshapes (under the scheduling mutex) when the table's sizes change.
  NodeDesc desc;
  // The table's node (for the host copy); null for a node internal to compiled code (snapshots).
  const std::shared_ptr<Node> node;
  hal::BufferRef buffer;
  // The stream whose context made it; to_host of an array nobody has written runs there.
  const StreamRef home;

  // Guarded by the scheduling mutex:
  std::optional<StreamPoint> writer;  // the last action that wrote it
  std::vector<StreamPoint> readers;   // actions that read it since, the latest per stream
  bool stale = false;                 // the host copy is newer than this array
  bool newer = false;                 // written on the device since it last matched the host copy
  const Stream* owner = nullptr;      // a shared array's writing stream, once it has written
};

using DeviceArrayRef = std::shared_ptr<DeviceArray>;

// Under the scheduling mutex: gives an array whose dimensions name sizes the shape of the sizes'
// `values` (NodeTable::size_values_locked): a larger buffer when it holds less than that shape
// (the old one lives on in work already queued), none when it holds enough; a reshaped array of
// a table node is stale (its host copy, reshaped too, is uploaded before it is read).
// FAILED_PRECONDITION naming the size when one it needs is not bound.
Status fit_to_sizes_locked(DeviceArray& array, const std::vector<int64_t>& values,
                           const std::vector<std::string>& size_names);

}  // namespace kiln::runtime
