// Context: where a stream's routines find their nodes' device arrays. Contexts form a tree: a
// child (returned by linking) sees its ancestors' arrays and owns the ones linking allocated for
// it; contexts on different streams of one device share the array of a kShared node.
//
// A caller may rely on:
//  - finalize() frees the arrays this context owns, not its ancestors', once (a second call does
//    nothing), but for one holding its node's newest value, which the node table keeps until it
//    is read back (kiln/runtime/node_table.h); afterwards linking into it, running routines
//    linked into it or its descendants, and transfers involving it are FAILED_PRECONDITION; work
//    already scheduled completes;
//  - a context keeps its backend, stream, node table and parent alive.
#pragma once

#include <map>
#include <unordered_map>
#include <vector>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/stream.h"

namespace kiln::runtime {

class Backend;
class DeviceArray;
class Routine;
struct PreparedRun;

class Context : public std::enable_shared_from_this<Context> {
 public:
  const std::string& label() const { return label_; }
  const StreamRef& stream() const { return stream_; }
  const std::shared_ptr<Context>& parent() const { return parent_; }
  const std::shared_ptr<NodeTable>& nodes() const { return nodes_; }
  Backend& backend() const { return *backend_; }

  void finalize();
  bool finalized() const;
  // Whether this context or an ancestor has an array for the node.
  bool has_array(std::string_view node) const;

 private:
  friend class Backend;
  friend class Routine;
  friend struct ContextInternals;  // the rest of the runtime (src/runtime/context_internals.h)
  // Under the scheduling mutex. FAILED_PRECONDITION when this context or an ancestor was
  // finalized; NOT_FOUND when no context of the tree has the node.
  Result<std::shared_ptr<DeviceArray>> find_array(std::string_view node) const;
  Status check_usable() const;

  Context(std::shared_ptr<Backend> backend, StreamRef stream, std::shared_ptr<NodeTable> nodes,
          std::shared_ptr<Context> parent, std::string label);

  std::shared_ptr<Backend> backend_;
  StreamRef stream_;
  std::shared_ptr<NodeTable> nodes_;
  std::shared_ptr<Context> parent_;
  std::string label_;
  // Guarded by the scheduling mutex:
  std::map<std::string, std::shared_ptr<DeviceArray>, std::less<>> arrays_;
  // What each routine that ran here resolved and recorded (Routine::run_in), by routine id. It
  // refers to ancestors' arrays too, so finalize() drops it here and in every descendant.
  std::unordered_map<uint64_t, std::shared_ptr<PreparedRun>> prepared_;
  std::vector<std::weak_ptr<Context>> children_;  // contexts linked into this one
  bool finalized_ = false;
};

using ContextRef = std::shared_ptr<Context>;

}  // namespace kiln::runtime
