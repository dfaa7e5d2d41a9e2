// NodeTable: the tensor nodes of a model as the runtime knows them, each with its host copy and
// the modes that decide where its device arrays live.
//
// A NodeTable is made from a Program and shared by every context that runs that program's
// routines, on any stream of any device. Nodes are identified by name: code linked into a
// context tree of this table must declare a node of the same name with the same dtype and shape.
//
// A caller may rely on:
//  - every node has a host copy, initialized from its initializer (seeded by name, as `kiln run`
//    does) or zeros;
//  - modes can be changed only before the node has a device array (FAILED_PRECONDITION after),
//    and inconsistent ones are refused (INVALID_ARGUMENT saying why);
//  - HostTensor::read / HostTensor::write are the automatic host transfers (see HostTensor);
//  - a table of a program with sizes (language version 2) binds them: a node whose dimensions
//    name sizes has the shape they give (see NodeTable::set_sizes).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/base/host_memory.h"
#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/ir/program.h"
#include "kiln/ral/element_types.h"
#include "kiln/runtime/stream.h"

namespace kiln::runtime {

class DeviceArray;

// What the host does with a node's data (OCANNL's hosted memory modes).
enum class HostedKind : uint8_t {
  kConstant,          // written by the host before use; never written on devices (consts)
  kChangedOnDevices,  // written by routines; the host reads results back (params, outputs)
  kVolatile,          // rewritten by the host between runs (inputs)
};
std::string_view hosted_kind_name(HostedKind kind);

// Whether the streams of one device share one array of the node.
enum class Sharing : uint8_t {
  kPerStream,  // each stream's context tree has its own array
  kShared,     // one array per device; if written, only its owner stream may write it
};
std::string_view sharing_name(Sharing sharing);

struct NodeDesc {
  std::string name;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> dims;
  size_t bytes = 0;
  HostedKind hosted = HostedKind::kChangedOnDevices;
  Sharing sharing = Sharing::kPerStream;
  bool written_by_routines = false;  // some routine of the program stores to it
  // A `const` of the program: its value is compiled into the kernels that read it, so the host
  // never sets it (HostTensor::write refuses).
  bool is_const = false;
  // Language version 2: per dimension, when a dimension names sizes. `dims` and `bytes` are then
  // the shape at the table's bound sizes (a size not bound yet counts as 0).
  std::vector<ir::SizeExpr> sized_dims;
};

// `n`'s name, type and shape (its bytes at its dims) as a NodeDesc; the rest as a default one.
NodeDesc shape_desc(const ir::TensorNode& n);

// The bytes of a host copy, zeros when made and never written to zero them where they come as
// zeros: a large copy in fresh pages stays the kernel's zero pages until written, so that a host
// copy nobody uses (an output read in place through host_view, an intermediate) costs address
// space, not memory; a large copy in the reused pages of a released one (host_memory.h) is
// zeroed once, which costs less than faulting in fresh pages where it is written.
using HostBytes = std::vector<std::byte, HostMemoryAllocator<std::byte>>;

// A node with its host copy. Beyond desc(), its members are the runtime's bookkeeping, guarded
// by the scheduling mutex; use HostTensor to read or write the host copy.
class Node {
 public:
  // The host copy starts empty: NodeTable::create sizes it, where a failed allocation becomes a
  // RESOURCE_EXHAUSTED status naming the node rather than an exception.
  explicit Node(NodeDesc desc) : desc_(std::move(desc)) {}
  const NodeDesc& desc() const { return desc_; }

  HostBytes host;
  // The host copy stands for zeros, unwritten (the zeros it was made with, or after a size
  // changed its shape, whatever its memory held before): an upload fills the array with zeros
  // instead of copying from the host, and a read gives zeros.
  bool host_zeros = false;
  // Every device array of this node (any context, any device), to mark them stale on a host
  // write.
  std::vector<std::weak_ptr<DeviceArray>> arrays;
  // The array written on a device after the host copy was last brought up to date, if any.
  // Held, not only pointed at: the newest value outlives the context that computed it (its
  // context finalized or dropped, its backend too), so that a read still returns it; the array
  // goes when the value is read back, the host copy is written, another array is written later,
  // or the table goes (~NodeTable).
  std::shared_ptr<DeviceArray> newer_on_device;
  // The last device action that reads or writes the host copy asynchronously (a to_host, or an
  // upload that could not snapshot it): the host waits for it before touching the copy.
  std::optional<StreamPoint> host_pending;

 private:
  friend class NodeTable;
  NodeDesc desc_;
};

class NodeTable;

// "f32[4, 8]": how the runtime's messages write a node's dtype and shape.
std::string shape_text(ir::DType dtype, const std::vector<int64_t>& dims);

// A host-side handle of one node: the automatic host transfers.
//  - read() waits for the node's pending device writers and copies the newest device data back
//    first when a device holds newer data than the host; when that copy failed (its writer
//    failed, or its stream did), read() returns the failure, never the stale host copy. This
//    holds after the context that computed the value, and its backend, are gone (finalized or
//    dropped): the table keeps the array holding a node's newest value (Node::newer_on_device)
//    until that value is read back, written over, or superseded;
//  - write() replaces the host copy and marks every device array stale, so that the next routine
//    or transfer that reads an array uploads the host copy first; a const's is refused
//    (INVALID_ARGUMENT: its value is compiled into the code).
// With automatic transfers switched off (NodeTable::set_automatic_transfers(false)), read() and
// write() touch only the host copy and the caller moves data with to_host / from_host (kiln/runtime/transfer.h).
class HostTensor {
 public:
  const NodeDesc& desc() const { return node_->desc(); }
  // `out` / `data` must hold exactly desc().bytes bytes (INVALID_ARGUMENT otherwise). read_as and
  // write_from with an element type (float, double, int8_t ... uint64_t, ral::Half,
  // ral::BFloat16: kiln/ral/element_types.h) also require the tensor's dtype to be that type's;
  // a bool tensor is read and written as uint8_t (std::vector<bool> holds bits, not bytes).
  Status read(std::span<std::byte> out, Timeout timeout = Timeout::infinite()) const;
  Status write(std::span<const std::byte> data) const;
  // `data` of shape `dims`, which binds the sizes the node's dimensions name: any shape that fits
  // the declaration (NodeTable::write_shaped, for one tensor).
  Status write(std::span<const std::byte> data, const std::vector<int64_t>& dims) const;
  template <typename T>
  Result<std::vector<T>> read_as(Timeout timeout = Timeout::infinite()) const;
  template <typename T>
  Status write_from(const std::vector<T>& values) const;

 private:
  friend class NodeTable;
  HostTensor(std::shared_ptr<NodeTable> table, std::shared_ptr<Node> node)
      : table_(std::move(table)), node_(std::move(node)) {}
  std::shared_ptr<NodeTable> table_;
  std::shared_ptr<Node> node_;
};

class NodeTable : public std::enable_shared_from_this<NodeTable> {
 public:
  // Host copies initialized from the program's initializers with `seed`. Defaults: consts are
  // kConstant, inputs kVolatile, everything else kChangedOnDevices; a node no routine writes
  // that is kConstant, or a param no routine writes, is kShared; everything else kPerStream.
  static Result<std::shared_ptr<NodeTable>> create(const ir::Program& program, uint64_t seed = 0);
  // Lets go of the arrays its nodes hold (Node::newer_on_device), which hold their nodes.
  ~NodeTable();

  // NOT_FOUND naming the node.
  Result<std::shared_ptr<Node>> find(std::string_view name) const;
  // The seed of the initializers; routines' random calls are keyed by it too.
  uint64_t seed() const { return seed_; }
  Result<HostTensor> tensor(std::string_view name);
  std::vector<std::string> names() const;

  // OK unless one of `nodes` (the nodes a routine reads) is an input that was never given a value:
  // its host copy still holds the zeros it was made with and no device array of it was written
  // (host_view, a transfer). FAILED_PRECONDITION naming the input and `routine` otherwise, which
  // the Python and C APIs return rather than run a routine on inputs nobody set.
  Status check_inputs_given(const std::vector<std::string>& nodes, std::string_view routine) const;

  // Refused once the node has a device array (FAILED_PRECONDITION). kConstant for a node that
  // a routine writes is INVALID_ARGUMENT.
  Status set_hosted_kind(std::string_view name, HostedKind kind);
  Status set_sharing(std::string_view name, Sharing sharing);

  // On by default. Off: routines never upload stale arrays, HostTensor::read never copies back.
  void set_automatic_transfers(bool on);
  bool automatic_transfers() const;

  // Sizes (language version 2), for a table made from a program that declares them.
  // The sizes' names, in declaration order, and their values (-1: not bound yet).
  std::vector<std::string> size_names() const;
  // A node's dimensions as declared, for messages: "[B, T]", "[N + 1, 3]", "[4, 8]".
  std::string declared_dims_text(const NodeDesc& desc) const;
  std::vector<int64_t> size_values() const;
  // Binds sizes by name. Every node whose shape changes gets a host copy of zeros at its new
  // shape (its values at the old one are gone), and its device arrays take the new shape when
  // next used (growing once past what they hold; never shrinking). NOT_FOUND for a size the
  // program does not declare, INVALID_ARGUMENT for a negative value or a tensor that would be
  // too large; on an error nothing changes.
  Status set_sizes(const std::map<std::string, int64_t, std::less<>>& values);
  // Host values of several tensors with their shapes, which bind the sizes their dimensions name
  // (any shape that fits a declaration): checked together, then written, or on an error nothing
  // changes. A size whose value changes is rebound as set_sizes does, unless it was set since the
  // last run of a routine (by set_sizes or an earlier write): then the shapes disagree. Two
  // writes naming one size disagree when their values differ. INVALID_ARGUMENT, naming the
  // tensor, the dimension, the size and the values, for a disagreement, a wrong rank, a fixed
  // dimension that differs, an affine dimension (`N + 1`) that its bound sizes do not give, or
  // data of another byte size; NOT_FOUND for an unknown tensor.
  // With `shape_only`, the write binds the sizes its shape names and writes no data: the caller
  // binds its memory of that shape as the node's array next (bind_host, kiln/runtime/bind.h).
  struct ShapedWrite {
    std::string name;
    std::span<const std::byte> data;
    std::vector<int64_t> dims;
    bool shape_only = false;
  };
  // `sizes` binds sizes by name in the same write (as set_sizes would, checked together): a
  // write's shape that disagrees with one is INVALID_ARGUMENT, NOT_FOUND names an unknown size.
  Status write_shaped(std::span<const ShapedWrite> writes, const std::map<std::string, int64_t, std::less<>>& sizes = {});

  // The runtime's, under the scheduling mutex: a routine of this table was scheduled (sizes set
  // before it are no longer "set for this run", HostTensor::write), and the sizes' values.
  void note_run();
  // Whether host memory `bytes` overlaps the memory of a device array of the table's nodes
  // other than `except` (bind_host: no two arrays share memory).
  bool overlaps_array_locked(std::span<const std::byte> bytes, const DeviceArray* except) const;
  const std::vector<int64_t>& size_values_locked() const { return size_values_; }
  // Counts the changes of the sizes' values: what a routine prepared at one count is stale at
  // another, even where the values came back to what they were (arrays grew in between).
  uint64_t size_generation_locked() const { return size_generation_; }

 private:
  friend class HostTensor;
  NodeTable() = default;
  // A size's number; NOT_FOUND naming the program's sizes.
  Result<size_t> size_number(std::string_view name) const;
  // set_sizes under the scheduling mutex, `values` by size number.
  Status set_sizes_locked(const std::vector<int64_t>& values);

  std::vector<ir::SizeDecl> sizes_;
  std::vector<int64_t> size_values_;     // -1: unbound
  std::vector<uint64_t> size_set_run_;   // runs_ when each size was last set (+1; 0: never)
  uint64_t size_generation_ = 0;         // changes of size_values_
  uint64_t runs_ = 0;                    // routines scheduled (note_run); under the mutex
  // Host copies replaced by set_sizes while a device action still wrote them, kept until it ends.
  struct RetiredHostCopy {
    HostBytes bytes;
    StreamPoint until;
  };
  std::vector<RetiredHostCopy> retired_host_copies_;

  std::map<std::string, std::shared_ptr<Node>, std::less<>> nodes_;
  std::atomic<bool> automatic_{true};
  uint64_t seed_ = 0;
};

namespace internal {
template <typename T>
Status check_element_type(const NodeDesc& desc) {
  static_assert(!std::is_same_v<T, bool>, "read and write bool tensors as uint8_t");
  // The tensor dtype whose elements are a T, if any (std::byte and char read raw bytes).
  constexpr std::optional<ir::DType> want = ral::dtype_of<T>();
  const bool bool_bytes = std::is_same_v<T, uint8_t> && desc.dtype == ir::DType::kBool;
  if (want && *want != desc.dtype && !bool_bytes) {
    return invalid_argument_error("tensor '" + desc.name + "' holds " + std::string(ir::dtype_name(desc.dtype)) +
                                  " elements, not " + std::string(ir::dtype_name(*want)));
  }
  if (desc.bytes % sizeof(T) != 0) return invalid_argument_error("tensor '" + desc.name + "': element size mismatch");
  return Status();
}
}  // namespace internal

template <typename T>
Result<std::vector<T>> HostTensor::read_as(Timeout timeout) const {
  KILN_RETURN_IF_ERROR(internal::check_element_type<T>(desc()));
  std::vector<T> values(desc().bytes / sizeof(T));
  KILN_RETURN_IF_ERROR(read(std::as_writable_bytes(std::span<T>(values)), timeout));
  return values;
}

template <typename T>
Status HostTensor::write_from(const std::vector<T>& values) const {
  KILN_RETURN_IF_ERROR(internal::check_element_type<T>(desc()));
  return write(std::as_bytes(std::span<const T>(values)));
}

}  // namespace kiln::runtime
