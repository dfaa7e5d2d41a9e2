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

  const NodeDesc desc;
  // The table's node (for the host copy); null for a node internal to compiled code (snapshots).
  const std::shared_ptr<Node> node;
  const hal::BufferRef buffer;
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

}  // namespace kiln::runtime
