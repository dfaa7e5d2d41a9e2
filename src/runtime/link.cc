// Backend's linking: code (kiln's compiled routines, or a caller's own kernels) bound into a new
// child context, with the arrays its routines use found in the context tree or made there.
#include <algorithm>
#include <map>
#include <set>

#include "kiln/codegen/c_emitter.h"
#include "kiln/runtime/backend.h"
#include "kiln/ir/call.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "runtime/device_array.h"
#include "runtime/routine_steps.h"
#include "runtime/scheduler.h"
#include "runtime/transfer_internal.h"

namespace kiln::runtime {

Result<Linked> Backend::link(const ContextRef& parent, const CodeRef& code, std::string_view routine) {
  KILN_ASSIGN_OR_RETURN(LinkedBatch batch, link_routines(parent, code, {std::string(routine)}));
  return Linked{batch.routines.front(), batch.context};
}

Result<LinkedBatch> Backend::link_batch(const ContextRef& parent, const CodeRef& code) {
  if (!code) return invalid_argument_error("link: no code");
  return link_routines(parent, code, code->routine_names());
}

namespace {

// Code of a program with sizes and a table of that program name the same sizes; otherwise
// (code bound to sizes, or without any) the numbers must agree.
bool same_shape(const NodeDesc& a, const ir::TensorNode& b) {
  if (a.dtype != b.dtype) return false;
  if (b.is_sized()) return a.sized_dims == b.sized_dims;
  return a.dims == b.dims;
}

// "f32[N, 4]" or "f32[4, 8]": a node's shape as its code declares it.
std::string declared_shape(const ir::TensorNode& n, const ir::Program& program) {
  return std::string(ir::dtype_name(n.dtype)) + ir::dims_text(n, program.sizes);
}

// The sizes a routine depends on (Routine::sizes): named by the dimensions of the tensors it
// reads or writes, or read by its kernels, in declaration order.
std::vector<std::string> sizes_depended_on(const ir::LoweredRoutine& lr, const ir::Program& program,
                                           const std::set<std::string>& reads, const std::set<std::string>& writes) {
  std::vector<bool> used(program.sizes.size(), false);
  for (const ir::Kernel& k : lr.kernels) {
    for (int size : ir::sizes_read(k)) used[static_cast<size_t>(size)] = true;
  }
  for (const ir::TensorNode& n : program.nodes) {
    if (!n.is_sized() || (!reads.count(n.name) && !writes.count(n.name))) continue;
    for (const ir::SizeExpr& d : n.sized_dims) {
      for (const auto& [size, coefficient] : d.terms) used[static_cast<size_t>(size)] = true;
    }
  }
  std::vector<std::string> names;
  for (size_t s = 0; s < used.size(); ++s) {
    if (used[s]) names.push_back(program.sizes[s].name);
  }
  return names;
}

}  // namespace

Result<LinkedBatch> Backend::link_routines(const ContextRef& parent, const CodeRef& code,
                                           const std::vector<std::string>& names) {
  if (!parent || !code) return invalid_argument_error("link: no context or code");
  if (&parent->backend() != this) {
    return invalid_argument_error("link: context '" + parent->label() + "' belongs to another backend");
  }
  if (!code->shared() && code->compiled_by_ != this) {
    return invalid_argument_error(
        "link: the code was compiled for another backend without `shared`; compile it with "
        "CompileOptions::shared to link it on several devices");
  }
  const std::vector<std::string> held = code->routine_names();
  for (const std::string& n : names) {
    if (std::find(held.begin(), held.end(), n) == held.end()) {
      return not_found_error("link: the code has no routine named '" + n + "'");
    }
  }
  // Building may run a compiler: not under the scheduling mutex.
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, code->executable_for(device_, options_.trace.get()));

  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_RETURN_IF_ERROR(parent->check_usable().annotate("link"));
  std::string label = parent->label() + "/";
  for (size_t i = 0; i < names.size(); ++i) label += (i ? "+" : "") + names[i];
  ContextRef child(new Context(shared_from_this(), parent->stream(), parent->nodes(), parent, label));
  std::erase_if(parent->children_, [](const std::weak_ptr<Context>& c) { return c.expired(); });
  parent->children_.push_back(child);

  LinkedBatch batch;
  batch.context = child;
  KILN_RETURN_IF_ERROR(code->kernels() ? add_kernel_routines(child, code, executable, names, batch.routines)
                                       : add_compiled_routines(child, code, executable, names, batch.routines));
  // In the order the caller named them (`names` are distinct: the code holds each routine once).
  std::vector<RoutineRef> ordered;
  for (const std::string& n : names) {
    auto it = std::find_if(batch.routines.begin(), batch.routines.end(),
                           [&](const RoutineRef& r) { return r->name() == n; });
    if (it != batch.routines.end()) ordered.push_back(*it);
  }
  batch.routines = std::move(ordered);
  return batch;
}

Status Backend::ensure_array(const ContextRef& child, const ir::TensorNode& n, const ir::Program& program) {
  const std::string where = "node '" + n.name + "'";
  Result<std::shared_ptr<DeviceArray>> found = child->find_array(n.name);
  if (found.ok()) {
    if (!same_shape((*found)->desc, n)) {
      return invalid_argument_error(where + " is " + declared_shape(n, program) + " in the code but " +
                                    shape_text((*found)->desc.dtype, (*found)->desc.dims) +
                                    " in the context");
    }
    return Status();
  }
  const std::shared_ptr<NodeTable>& table = child->nodes();
  std::shared_ptr<Node> node;
  NodeDesc desc;
  if (Result<std::shared_ptr<Node>> in_table = table->find(n.name); in_table.ok()) {
    node = *in_table;
    desc = node->desc();
    if (!same_shape(desc, n)) {
      return invalid_argument_error(where + " is " + declared_shape(n, program) +
                                    " in the code but " + shape_text(desc.dtype, desc.dims) +
                                    " in the node table");
    }
  } else {
    // Internal to the compiled code (a snapshot): a private array, zero-filled; one whose shape
    // names sizes takes the table's values when it is first used (fit_to_sizes_locked).
    desc = shape_desc(n);
  }
  const std::pair<const NodeTable*, std::string> key{table.get(), n.name};
  if (node && desc.sharing == Sharing::kShared) {
    auto it = shared_arrays_.find(key);
    if (it != shared_arrays_.end() && it->second.table.lock() == table) {
      if (std::shared_ptr<DeviceArray> shared = it->second.array.lock()) {
        child->arrays_.emplace(n.name, shared);
        return Status();
      }
    }
  }
  Stream& stream = *child->stream();
  Result<hal::BufferRef> buffer = device_->allocator().allocate({}, std::max<size_t>(desc.bytes, 1));
  if (!buffer.ok()) return buffer.status().annotate(where);
  auto array = std::make_shared<DeviceArray>(desc, node, *buffer, child->stream());
  const bool zeroed = (*buffer)->storage()->zeroed_when_allocated();
  if (node) {
    std::erase_if(node->arrays, [](const std::weak_ptr<DeviceArray>& a) { return a.expired(); });
    node->arrays.push_back(array);
    if (desc.sharing == Sharing::kShared) shared_arrays_[key] = {table, array};
    // Zeros onto memory that is zeros already would only touch every page.
    if (!(node->host_zeros && zeroed)) KILN_RETURN_IF_ERROR(upload_locked(stream, *array).status().annotate(where));
  } else if (!zeroed) {
    KILN_RETURN_IF_ERROR(zero_locked(stream, *array, "zero " + n.name).status().annotate(where));
  }
  child->arrays_.emplace(n.name, std::move(array));
  return Status();
}

Status Backend::place_shared_buffer(const ContextRef& child, const ir::LoweredRoutine& routine,
                                    const ir::Program& program) {
  if (routine.shared.empty()) return Status();
  std::vector<DeviceArray*> arrays;
  for (const ir::SharedNode& shared : routine.shared) {
    const ir::TensorNode& n = program.nodes[static_cast<size_t>(shared.node)];
    auto array = std::make_shared<DeviceArray>(shape_desc(n), nullptr, nullptr, child->stream());
    arrays.push_back(array.get());
    child->arrays_.insert_or_assign(n.name, std::move(array));
  }
  return lay_out_shared_locked(arrays, routine.shared).annotate("the shared buffer of routine '" + routine.name + "'");
}

Status Backend::add_compiled_routines(const ContextRef& child, const CodeRef& code,
                                      const hal::ExecutableRef& executable,
                                      const std::vector<std::string>& names, std::vector<RoutineRef>& out) {
  const ir::Program& program = code->lowered().program;
  const bool sized = code->needs_sizes();
  if (sized) {
    // Sizes bound when the routines run: the table's, which must be the same sizes.
    std::vector<std::string> names;
    for (const ir::SizeDecl& s : program.sizes) names.push_back(s.name);
    if (child->nodes()->size_names() != names) {
      return invalid_argument_error("link: the program declares sizes, which the node table does not: make the table "
                                    "from the program with sizes (its routines then run at the table's sizes), or bind "
                                    "them first (Code::at_sizes)");
    }
  }
  auto ensure = [&](int id) { return ensure_array(child, program.nodes[id], program).annotate("link"); };

  // Which hidden node is the merge copy of which node.
  std::map<int, std::string> merge_of;
  for (const ir::TensorNode& n : program.nodes) {
    const int m = ir::merge_node_of(code->lowered(), n.id);
    if (m >= 0) merge_of[m] = n.name;
  }

  uint32_t ordinal = 0;
  for (const ir::LoweredRoutine& lr : code->lowered().routines) {
    const bool wanted = std::find(names.begin(), names.end(), lr.name) != names.end();
    if (!wanted) {
      ordinal += static_cast<uint32_t>(lr.kernels.size());
      continue;
    }
    KILN_RETURN_IF_ERROR(place_shared_buffer(child, lr, program).annotate("link"));
    std::shared_ptr<Routine> routine(new Routine(lr.name, child, code, executable));
    routine->sized_ = sized;
    std::set<std::string> reads, writes;
    for (const ir::Kernel& k : lr.kernels) {
      Routine::Dispatch d;
      d.export_ordinal = ordinal++;
      d.kernel = &k;
      if (sized) {
        // Workgroups and constants come from the table's sizes when the routine runs.
      } else if (k.size_count > 0) {
        // Sized by the extents at the bound sizes, which the kernel reads from its constants.
        d.workgroups[0] = dispatch_workgroups(ir::kernel_at_sizes(k, code->sizes()), device_->info().capabilities,
                                              options_.max_workgroups);
        d.constants = ir::size_constants(code->sizes());
      } else {
        d.workgroups[0] = dispatch_workgroups(k, device_->info().capabilities, options_.max_workgroups);
      }
      const ir::NodeAccess access = ir::node_access(k);
      for (size_t b = 0; b < k.nodes.size(); ++b) {
        const int id = k.nodes[b];
        const std::string& name = program.nodes[id].name;
        d.bindings.push_back(name);
        if (name == ir::kTraceRunNode) {
          d.trace_binding = static_cast<int>(b);
          routine->traced_ = true;
          continue;
        }
        if (auto m = merge_of.find(id); m != merge_of.end()) {
          d.merge_binding = static_cast<int>(b);
          routine->merge_node_ = m->second;
          routine->merge_bytes_ = static_cast<size_t>(program.nodes[id].byte_size());
          continue;
        }
        KILN_RETURN_IF_ERROR(ensure(id));
        if (std::binary_search(access.read.begin(), access.read.end(), id)) reads.insert(name);
        if (std::binary_search(access.written.begin(), access.written.end(), id)) writes.insert(name);
      }
      routine->dispatches_.push_back(std::move(d));
    }
    routine->lowered_ = &lr;
    if (sized) {
      // Bound to each run's shapes when it runs; their tensors are read and written meanwhile.
      for (const ir::LoweredCall& c : lr.calls) {
        for (int id : ir::call_tensors(c.call)) {
          KILN_RETURN_IF_ERROR(ensure(id));
          reads.insert(program.nodes[id].name);
        }
        for (int id : c.call.outputs) writes.insert(program.nodes[id].name);
      }
    } else {
      Result<std::vector<std::shared_ptr<const ral::BoundCall>>> calls = bind_routine_calls(lr, program, *device_);
      if (!calls.ok()) return calls.status().annotate("link");
      routine->calls_ = std::move(*calls);
    }
    if (calls_are_kernels(device_->info(), code->compiled_program())) {
      const size_t index = static_cast<size_t>(&lr - code->lowered().routines.data());
      routine->first_call_ordinal_ = call_export_ordinal(code->lowered(), index, 0);
    }
    for (const auto& call : routine->calls_) {
      const std::vector<int>& tensors = call->tensors();
      for (size_t t = 0; t < tensors.size(); ++t) {
        KILN_RETURN_IF_ERROR(ensure(tensors[t]));
        const std::string& name = program.nodes[tensors[t]].name;
        if (call->is_output(t)) writes.insert(name);
        if (!call->is_output(t) || call->reads_outputs()) reads.insert(name);
      }
    }
    routine->reads_.assign(reads.begin(), reads.end());
    routine->writes_.assign(writes.begin(), writes.end());
    if (sized) routine->sizes_ = sizes_depended_on(lr, program, reads, writes);
    out.push_back(std::move(routine));
  }
  return Status();
}

Status Backend::add_kernel_routines(const ContextRef& child, const CodeRef& code,
                                    const hal::ExecutableRef& executable,
                                    const std::vector<std::string>& names, std::vector<RoutineRef>& out) {
  const ir::Program& program = code->lowered().program;
  for (const KernelRoutine& kr : code->kernels()->routines) {
    if (std::find(names.begin(), names.end(), kr.name) == names.end()) continue;
    std::shared_ptr<Routine> routine(new Routine(kr.name, child, code, executable));
    std::set<std::string> reads, writes;
    for (const KernelDispatch& kd : kr.dispatches) {
      const std::string where = "link: routine '" + kr.name + "', kernel '" + kd.kernel + "'";
      Result<uint32_t> ordinal = executable->lookup_export(kd.kernel);
      if (!ordinal.ok()) return ordinal.status().annotate(where);
      Routine::Dispatch d;
      d.export_ordinal = *ordinal;
      d.workgroups = kd.workgroups;
      d.constants = kd.constants;
      for (const KernelBinding& b : kd.bindings) {
        // check_kernel_set found every node in the program; the context's table may still lack
        // one (a table of another program), and then there is no host copy to start it from.
        const ir::TensorNode* n = program.find_node(b.node);
        if (!n) return internal_error(where + ": node '" + b.node + "' is not in the code's program");
        Result<std::shared_ptr<Node>> node = child->nodes()->find(b.node);
        if (!node.ok()) return node.status().annotate(where);
        if (b.merge) {
          // The stream's merge buffer, bound when the routine runs (Routine::run_in checks that it
          // holds this node); the node's own array is not used.
          d.merge_binding = static_cast<int>(d.bindings.size());
          d.bindings.push_back(b.node);
          routine->merge_node_ = b.node;
          routine->merge_bytes_ = static_cast<size_t>(n->byte_size());
          continue;
        }
        const bool writes_node = b.access != KernelAccess::kRead;
        if (writes_node && (*node)->desc().hosted == HostedKind::kConstant) {
          return invalid_argument_error(where + " writes node '" + b.node +
                                        "', which the node table holds as constant (never written on devices)");
        }
        KILN_RETURN_IF_ERROR(ensure_array(child, *n, program).annotate(where));
        d.bindings.push_back(b.node);
        if (b.access != KernelAccess::kWrite) reads.insert(b.node);
        if (writes_node) writes.insert(b.node);
      }
      routine->dispatches_.push_back(std::move(d));
    }
    routine->reads_.assign(reads.begin(), reads.end());
    routine->writes_.assign(writes.begin(), writes.end());
    out.push_back(std::move(routine));
  }
  return Status();
}

}  // namespace kiln::runtime
