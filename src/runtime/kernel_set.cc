#include "kiln/runtime/kernel_set.h"

#include <set>

#include "kiln/runtime/node_table.h"

namespace kiln::runtime {

namespace {

const hal::ExportInfo* find_export(const hal::ExecutableSource& source, const std::string& name) {
  for (const hal::ExportInfo& e : source.exports) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Status check_dispatch(const KernelDispatch& d, const hal::ExecutableSource& source,
                      const ir::Program& program, const std::string& where) {
  const hal::ExportInfo* info = find_export(source, d.kernel);
  if (!info) {
    return not_found_error(where + ": '" + source.label + "' does not export a kernel named '" + d.kernel + "'");
  }
  if (d.bindings.size() != info->binding_count) {
    return invalid_argument_error(where + " binds " + std::to_string(d.bindings.size()) +
                                  " nodes, but the export takes " + std::to_string(info->binding_count));
  }
  if (d.constants.size() != info->constant_count) {
    return invalid_argument_error(where + " passes " + std::to_string(d.constants.size()) +
                                  " push constants, but the export takes " + std::to_string(info->constant_count));
  }
  for (uint32_t count : d.workgroups) {
    if (count == 0) return invalid_argument_error(where + " has a workgroup count of 0");
  }
  int merges = 0;
  for (const KernelBinding& b : d.bindings) {
    const ir::TensorNode* node = program.find_node(b.node);
    if (!node) return not_found_error(where + " binds node '" + b.node + "', which the program does not declare");
    if (node->dtype != b.dtype || node->dims != b.dims) {
      return invalid_argument_error(where + " binds node '" + b.node + "' as " + shape_text(b.dtype, b.dims) +
                                    ", but the program declares it " + shape_text(node->dtype, node->dims));
    }
    if (!b.merge) continue;
    // The merge buffer is the stream's, shared by every routine that reads it: never written.
    if (b.access != KernelAccess::kRead) {
      return invalid_argument_error(where + " binds the merge buffer of '" + b.node +
                                    "' for writing; a merge buffer is read only (KernelAccess::kRead)");
    }
    if (++merges > 1) return invalid_argument_error(where + " binds two merge buffers; a dispatch binds at most one");
  }
  return Status();
}

}  // namespace

Status check_kernel_set(const KernelSet& kernels, const ir::Program& program) {
  std::set<std::string> names;
  for (const KernelRoutine& r : kernels.routines) {
    if (r.name.empty()) return invalid_argument_error("kernel set '" + kernels.source.label + "': a routine has no name");
    if (!names.insert(r.name).second) {
      return invalid_argument_error("kernel set '" + kernels.source.label + "' has two routines named '" + r.name + "'");
    }
    const std::string* merge_node = nullptr;
    for (size_t i = 0; i < r.dispatches.size(); ++i) {
      const KernelDispatch& d = r.dispatches[i];
      const std::string where = "routine '" + r.name + "', dispatch " + std::to_string(i) + " (kernel '" + d.kernel + "')";
      KILN_RETURN_IF_ERROR(check_dispatch(d, kernels.source, program, where));
      for (const KernelBinding& b : d.bindings) {
        if (!b.merge) continue;
        if (merge_node && *merge_node != b.node) {
          return invalid_argument_error(where + " binds the merge buffer of '" + b.node + "', but routine '" + r.name +
                                        "' binds that of '" + *merge_node +
                                        "' already; a stream's merge buffer holds one node at a time");
        }
        merge_node = &b.node;
      }
    }
  }
  return Status();
}

}  // namespace kiln::runtime
