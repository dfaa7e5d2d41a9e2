// DeviceArray: the buffer of one node in one context tree (or shared by a device's streams),
// with the synchronization state that per-node scheduling keeps for it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/loop/loop.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/stream.h"

namespace kiln::runtime {

struct PreparedRun;

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
  // `buffer` is the caller's host memory (bind_host): the caller may write it at any time, so
  // it stays newer than the host copy (a download never makes them equal); a host write or a
  // change of shape gives the array memory of its own again.
  bool bound = false;
  // Runs whose recorded steps bind `buffer` (Routine::run_in): replace_buffer_locked drops
  // their steps, so that they bind the new buffer and the old one goes once queued work is done.
  std::vector<std::weak_ptr<PreparedRun>> recorded_by;
  // Set for a node of a routine's shared buffer (ir::LoweredRoutine::shared): `buffer` is a view
  // of this one, and lay_out_shared_locked, not fit_to_sizes_locked, moves it when sizes change.
  hal::BufferRef shared_whole;
};

using DeviceArrayRef = std::shared_ptr<DeviceArray>;

// Under the scheduling mutex: `buffer` as the array's memory (`bound`: the caller's, bind_host),
// with the steps recorded over the old one dropped (queued work keeps the old one until done).
void replace_buffer_locked(DeviceArray& array, hal::BufferRef buffer, bool bound);
// Under the scheduling mutex: ends a binding (DeviceArray::bound): a new buffer of the array's
// size of its own, holding nothing yet (the caller's memory is left as it is). Nothing when not
// bound.
Status unbind_locked(DeviceArray& array);
// Routine::run_in's (routine.cc): forgets the steps `run` recorded.
void forget_recorded_steps_locked(PreparedRun& run);

// Under the scheduling mutex: gives an array whose dimensions name sizes the shape of the sizes'
// `values` (NodeTable::size_values_locked): a larger buffer when it holds less than that shape
// (the old one lives on in work already queued), none when it holds enough; a reshaped array of
// a table node is stale (its host copy, reshaped too, is uploaded before it is read).
// FAILED_PRECONDITION naming the size when one it needs is not bound.
// A bound array (DeviceArray::bound) whose shape changes gets memory of its own: the caller's
// holds the old shape.
Status fit_to_sizes_locked(DeviceArray& array, const std::vector<int64_t>& values,
                           const std::vector<std::string>& size_names);

// The views of one routine's shared buffer (ir::layout_shared_buffer) for nodes of `bytes` each,
// in `whole` where it holds the layout, else in a new buffer of `allocator`'s, which `whole`
// then is.
Result<std::vector<hal::BufferRef>> shared_views(hal::Allocator& allocator, const std::vector<ir::SharedNode>& nodes,
                                                 const std::vector<int64_t>& bytes, hal::BufferRef& whole);

// Under the scheduling mutex: gives `arrays` (one routine's shared buffer, in the order of its
// `nodes`, each with its current shape) their places (ir::layout_shared_buffer): views of their
// shared buffer, or of a new one where that is too small or they have none yet.
Status lay_out_shared_locked(std::span<DeviceArray* const> arrays, const std::vector<ir::SharedNode>& nodes);

}  // namespace kiln::runtime
