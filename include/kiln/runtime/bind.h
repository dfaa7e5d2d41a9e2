// Binding a caller's host memory as a node's device array: zero-copy in.
//
// bind_host(context, node, bytes, keep_alive) makes the caller's memory the array of `node` that
// the context tree's routines read and write (the one the context or an ancestor holds; for a
// kShared node the one every stream of the device shares), in place of kiln's own. A caller may
// rely on:
//  - what the memory holds is the node's value in that tree from then on, and routines' writes
//    land in it: the caller sees them once the routines have completed (a stream's await);
//    HostTensor::read copies the value from it, host_view and device_memory hand it out; the
//    caller may write it between runs (while no routine that uses it is scheduled and not yet
//    complete: a data race otherwise, as with a view);
//  - the binding lasts until the node is set again: another bind_host, or a host write
//    (HostTensor::write, NodeTable::write_shaped without shape_only), after which the array has
//    memory of its own again holding the new value while the caller's keeps what it held; or
//    until a change of sizes gives the node another shape (the array gets its own memory at the
//    new shape); or until the context that holds the array is finalized;
//  - kiln holds `keep_alive` while the array is bound to the memory and until the work scheduled
//    with it has completed, then drops it on whichever thread drops the last use (a queue's
//    thread included, possibly under kiln's locks: what its destruction runs must not call kiln);
//  - the node's arrays in other context trees (other streams' kPerStream arrays) are not
//    changed, as after a routine's write: device_to_device or a host write carries the value.
//
// The memory is bound where the generated code can use it as the array, else the call binds
// nothing and returns false (the caller then writes a copy, HostTensor::write):
//  - the device's memory is host memory (cpu, interp; not OpenCL or CUDA, whose kernels cannot
//    address it in place);
//  - the address is a multiple of the element size (4 bytes for f32 and i32, 8 for f64 and i64):
//    kernels access elements as C does, and vector loads go through memcpy, so nothing more is
//    needed (kiln's own arrays are 64-byte aligned, for speed only);
//  - it overlaps no other array of the table's nodes (another node's, or another array of this
//    node): kernels take their arrays as not aliasing one another (`restrict`), and the scheduler
//    orders work by array, not by address. Memory that is exactly the array's current memory is
//    already bound: the call only records that the caller may have written it;
//  - the tree has an array of the node (a routine linked into it uses the node), and it is not
//    empty.
// INVALID_ARGUMENT when `bytes` is not the node's size at the table's sizes (a node whose shape
// names sizes: bind them first, NodeTable::write_shaped with shape_only) or for a const (its value
// is compiled into the code); FAILED_PRECONDITION for a finalized context.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/runtime/context.h"

namespace kiln::runtime {

Result<bool> bind_host(const ContextRef& context, std::string_view node, std::span<std::byte> bytes,
                       std::shared_ptr<void> keep_alive);

}  // namespace kiln::runtime
