#include "capi/conversions.h"

#include <string>

namespace kiln::capi {

namespace {

// `count` elements at `items`, which may be NULL only when there are none.
template <typename T>
Status check_array(const T* items, size_t count, const std::string& what) {
  if (count > 0 && !items) return invalid_argument_error(what + " is NULL but its count is " + std::to_string(count));
  return Status();
}

Result<runtime::KernelAccess> to_access(kiln_access access) {
  switch (access) {
    case KILN_READ: return runtime::KernelAccess::kRead;
    case KILN_WRITE: return runtime::KernelAccess::kWrite;
    case KILN_READ_WRITE: return runtime::KernelAccess::kReadWrite;
  }
  return invalid_argument_error("access " + std::to_string(static_cast<int>(access)) + " is not a kiln_access");
}

Result<runtime::KernelBinding> to_binding(const kiln_kernel_binding& c, const std::string& where) {
  if (!c.node) return invalid_argument_error(where + ": node is NULL");
  runtime::KernelBinding b;
  b.node = c.node;
  const std::string here = where + " (node '" + b.node + "')";
  Result<ir::DType> dtype = to_dtype(c.dtype);
  if (!dtype.ok()) return invalid_argument_error(here + ": " + dtype.status().message());
  b.dtype = *dtype;
  KILN_RETURN_IF_ERROR(check_array(c.dims, c.rank, here + ": dims"));
  if (c.rank > 0) b.dims.assign(c.dims, c.dims + c.rank);
  Result<runtime::KernelAccess> access = to_access(c.access);
  if (!access.ok()) return invalid_argument_error(here + ": " + access.status().message());
  b.access = *access;
  b.merge = c.merge != 0;
  return b;
}

Result<runtime::KernelDispatch> to_dispatch(const kiln_kernel_dispatch& c, const std::string& where) {
  if (!c.kernel) return invalid_argument_error(where + ": kernel is NULL");
  runtime::KernelDispatch d;
  d.kernel = c.kernel;
  const std::string here = where + " (kernel '" + d.kernel + "')";
  d.workgroups = {c.workgroups[0], c.workgroups[1], c.workgroups[2]};
  KILN_RETURN_IF_ERROR(check_array(c.bindings, c.binding_count, here + ": bindings"));
  KILN_RETURN_IF_ERROR(check_array(c.constants, c.constant_count, here + ": constants"));
  for (size_t i = 0; i < c.binding_count; ++i) {
    KILN_ASSIGN_OR_RETURN(runtime::KernelBinding b, to_binding(c.bindings[i], here + ", binding " + std::to_string(i)));
    d.bindings.push_back(std::move(b));
  }
  if (c.constant_count > 0) d.constants.assign(c.constants, c.constants + c.constant_count);
  return d;
}

}  // namespace

Result<ir::DType> to_dtype(kiln_dtype dtype) {
  // kiln_dtype's values are ir::DType's numbers (kiln.cc checks them).
  for (ir::DType type : ir::kAllDTypes) {
    if (static_cast<int>(type) == dtype) return type;
  }
  return invalid_argument_error("dtype " + std::to_string(static_cast<int>(dtype)) +
                                " is not a kiln_dtype");
}

Result<runtime::KernelSet> to_kernel_set(const kiln_kernel_set& c) {
  runtime::KernelSet set;
  if (!c.format) return invalid_argument_error("kernel set: format is NULL");
  if (!c.source) return invalid_argument_error("kernel set: source is NULL");
  set.source.format = c.format;
  set.source.source = c.source;
  set.source.label = c.label ? c.label : "kernels";
  const std::string where = "kernel set '" + set.source.label + "'";
  KILN_RETURN_IF_ERROR(check_array(c.exports, c.export_count, where + ": exports"));
  KILN_RETURN_IF_ERROR(check_array(c.routines, c.routine_count, where + ": routines"));
  for (size_t i = 0; i < c.export_count; ++i) {
    const kiln_kernel_export& e = c.exports[i];
    if (!e.name) return invalid_argument_error(where + ": the name of export " + std::to_string(i) + " is NULL");
    set.source.exports.push_back({e.name, e.binding_count, e.constant_count, e.any_local_size != 0});
  }
  for (size_t r = 0; r < c.routine_count; ++r) {
    const kiln_kernel_routine& cr = c.routines[r];
    const std::string routine = where + ", routine " + std::to_string(r);
    if (!cr.name) return invalid_argument_error(routine + ": name is NULL");
    runtime::KernelRoutine kr;
    kr.name = cr.name;
    const std::string named = routine + " ('" + kr.name + "')";
    KILN_RETURN_IF_ERROR(check_array(cr.dispatches, cr.dispatch_count, named + ": dispatches"));
    for (size_t d = 0; d < cr.dispatch_count; ++d) {
      KILN_ASSIGN_OR_RETURN(runtime::KernelDispatch dispatch,
                            to_dispatch(cr.dispatches[d], named + ", dispatch " + std::to_string(d)));
      kr.dispatches.push_back(std::move(dispatch));
    }
    set.routines.push_back(std::move(kr));
  }
  return set;
}

}  // namespace kiln::capi
