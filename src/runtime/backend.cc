#include "kiln/runtime/backend.h"

#include <algorithm>
#include <set>

#include "kiln/codegen/c_emitter.h"
#include "kiln/ral/context.h"
#include "runtime/device_array.h"
#include "runtime/routine_steps.h"
#include "runtime/scheduler.h"
#include "runtime/stream_state.h"
#include "runtime/transfer_internal.h"

namespace kiln::runtime {

Result<std::shared_ptr<Backend>> Backend::create(hal::DeviceRef device, BackendOptions options) {
  if (!device) return invalid_argument_error("Backend::create: no device");
  std::shared_ptr<Backend> backend(new Backend(std::move(device), std::move(options)));
  backend->ral_ = std::make_shared<ral::Context>(backend->device_->info().driver);
  return backend;
}

Backend::~Backend() {
  // Queued work may still use host memory the runtime owns (staging, host copies).
  for (const StreamRef& s : streams_) (void)s->await();
  // A stream's streaming merge source is an array whose home is a stream (possibly this one):
  // Stream → StreamState → DeviceArray → Stream would keep both alive forever. Nothing can use
  // them once the backend is gone (every context holds it); released outside the lock.
  std::vector<std::shared_ptr<DeviceArray>> sources;
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    for (const StreamRef& s : streams_) {
      sources.push_back(std::move(s->state().merge_streaming_source));
      s->state().merge_streaming_source.reset();
      s->state().merge_node.clear();
    }
  }
}

Result<StreamRef> Backend::new_stream(std::string name) {
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, device_->create_queue(name));
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  const int ordinal = static_cast<int>(streams_.size());
  if (name.empty()) name = device_->info().name + "/s" + std::to_string(ordinal);
  auto stream = std::make_shared<Stream>(device_, std::move(queue), std::move(name), ordinal);
  stream->state().trace = options_.trace;
  streams_.push_back(stream);
  return stream;
}

std::vector<StreamRef> Backend::streams() const {
  std::lock_guard<std::mutex> lock(scheduling_mutex());
  return streams_;
}

Status Backend::await(Timeout timeout) const {
  Status first;
  for (const StreamRef& s : streams()) {
    Status status = s->await(timeout);
    if (first.ok() && !status.ok()) first = status;
  }
  return first;
}

bool Backend::is_idle() const {
  for (const StreamRef& s : streams()) {
    if (!s->is_idle()) return false;
  }
  return true;
}

Result<CodeRef> Backend::compile(const ir::Program& program, std::string_view routine,
                                 const CompileOptions& options) {
  const std::string name(routine);
  return compile_batch(program, {&name, 1}, options);
}

Result<CodeRef> Backend::compile_batch(const ir::Program& program,
                                       std::span<const std::string> routines,
                                       const CompileOptions& options) {
  for (const std::string& r : routines) {
    if (!program.find_routine(r)) {
      return not_found_error("the program has no routine named '" + r + "'");
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, ir::lower_program(program, options.lower));
  return compile_lowered(std::move(lowered), routines, options);
}

Result<CodeRef> Backend::compile_lowered(ir::LoweredProgram lowered,
                                         std::span<const std::string> routines,
                                         const CompileOptions& options) {
  std::shared_ptr<Code> code(new Code());
  code->lowered_.program = std::move(lowered.program);
  for (const std::string& r : routines) {
    auto it = std::find_if(lowered.routines.begin(), lowered.routines.end(),
                           [&](const ir::LoweredRoutine& lr) { return lr.name == r; });
    if (it == lowered.routines.end()) {
      return not_found_error("the program has no routine named '" + r + "'");
    }
    // The code holds each routine once (its kernels are exports of one executable, whose names
    // must be unique); running a routine twice is the caller's schedule, not a second copy.
    const std::vector<ir::LoweredRoutine>& held = code->lowered_.routines;
    if (std::none_of(held.begin(), held.end(), [&](const ir::LoweredRoutine& lr) { return lr.name == r; })) {
      code->lowered_.routines.push_back(*it);
    }
  }
  code->shared_ = options.shared;
  code->compiled_by_ = this;
  // Shared code is built now, so that its errors surface here; other code at its first link.
  if (options.shared) KILN_RETURN_IF_ERROR(code->executable_for(device_).status());
  return CodeRef(std::move(code));
}

Result<ContextRef> Backend::make_context(const StreamRef& stream, std::shared_ptr<NodeTable> nodes,
                                         std::string label) {
  if (!stream || !nodes) return invalid_argument_error("make_context: no stream or node table");
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex());
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) {
      return invalid_argument_error("stream '" + stream->name() + "' belongs to another backend");
    }
  }
  if (label.empty()) label = stream->name();
  return ContextRef(new Context(shared_from_this(), stream, std::move(nodes), nullptr, std::move(label)));
}

Result<Linked> Backend::link(const ContextRef& parent, const CodeRef& code, std::string_view routine) {
  KILN_ASSIGN_OR_RETURN(LinkedBatch batch, link_routines(parent, code, {std::string(routine)}));
  return Linked{batch.routines.front(), batch.context};
}

Result<LinkedBatch> Backend::link_batch(const ContextRef& parent, const CodeRef& code) {
  return link_routines(parent, code, code->routine_names());
}

namespace {

bool same_shape(const NodeDesc& a, const ir::TensorNode& b) {
  return a.dtype == b.dtype && a.dims == b.dims;
}

std::string shape_text(ir::DType dtype, const std::vector<int64_t>& dims) {
  std::string text(ir::dtype_name(dtype));
  text += "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
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
  for (const std::string& n : names) {
    if (std::find_if(code->lowered().routines.begin(), code->lowered().routines.end(),
                     [&](const ir::LoweredRoutine& r) { return r.name == n; }) ==
        code->lowered().routines.end()) {
      return not_found_error("link: the code has no routine named '" + n + "'");
    }
  }
  // Building may run a compiler: not under the scheduling mutex.
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, code->executable_for(device_));

  std::lock_guard<std::mutex> lock(scheduling_mutex());
  KILN_RETURN_IF_ERROR(parent->check_usable().annotate("link"));
  const ir::Program& program = code->lowered().program;
  std::string label = parent->label() + "/";
  for (size_t i = 0; i < names.size(); ++i) label += (i ? "+" : "") + names[i];
  ContextRef child(new Context(shared_from_this(), parent->stream(), parent->nodes(), parent, label));
  std::erase_if(parent->children_, [](const std::weak_ptr<Context>& c) { return c.expired(); });
  parent->children_.push_back(child);
  Stream& stream = *parent->stream();

  // The array of a node: from the tree, the device's shared arrays, or new (uploaded).
  auto ensure_array = [&](int id) -> Status {
    const ir::TensorNode& n = program.nodes[id];
    const std::string where = "link: node '" + n.name + "'";
    Result<std::shared_ptr<DeviceArray>> found = child->find_array(n.name);
    if (found.ok()) {
      if (!same_shape((*found)->desc, n)) {
        return invalid_argument_error(where + " is " + shape_text(n.dtype, n.dims) + " in the code but " +
                                      shape_text((*found)->desc.dtype, (*found)->desc.dims) +
                                      " in the context");
      }
      return Status();
    }
    std::shared_ptr<Node> node;
    NodeDesc desc;
    if (Result<std::shared_ptr<Node>> in_table = parent->nodes()->find(n.name); in_table.ok()) {
      node = *in_table;
      desc = node->desc();
      if (!same_shape(desc, n)) {
        return invalid_argument_error(where + " is " + shape_text(n.dtype, n.dims) +
                                      " in the code but " + shape_text(desc.dtype, desc.dims) +
                                      " in the node table");
      }
    } else {
      // Internal to the compiled code (a snapshot): a private array, zero-filled.
      desc.name = n.name;
      desc.dtype = n.dtype;
      desc.dims = n.dims;
      desc.bytes = static_cast<size_t>(n.byte_size());
    }
    const std::pair<const NodeTable*, std::string> key{parent->nodes().get(), n.name};
    if (node && desc.sharing == Sharing::kShared) {
      auto it = shared_arrays_.find(key);
      if (it != shared_arrays_.end() && it->second.table.lock() == parent->nodes()) {
        if (std::shared_ptr<DeviceArray> shared = it->second.array.lock()) {
          child->arrays_.emplace(n.name, shared);
          return Status();
        }
      }
    }
    Result<hal::BufferRef> buffer = device_->allocator().allocate({}, std::max<size_t>(desc.bytes, 1));
    if (!buffer.ok()) return buffer.status().annotate(where);
    auto array = std::make_shared<DeviceArray>(desc, node, *buffer, parent->stream());
    if (node) {
      std::erase_if(node->arrays, [](const std::weak_ptr<DeviceArray>& a) { return a.expired(); });
      node->arrays.push_back(array);
      if (desc.sharing == Sharing::kShared) shared_arrays_[key] = {parent->nodes(), array};
      KILN_RETURN_IF_ERROR(upload_locked(stream, *array).status().annotate(where));
    } else {
      const ArrayAccess access{array.get(), false, true};
      const uint8_t zero = 0;
      KILN_RETURN_IF_ERROR(schedule(stream, {&access, 1}, {}, {"zero " + n.name, "transfer"},
                                    [&](const hal::SemaphoreList& w, const hal::SemaphoreList& s) {
                                      return stream.queue()->fill(w, s, array->buffer, 0, desc.bytes, &zero, 1);
                                    }).status().annotate(where));
    }
    child->arrays_.emplace(n.name, std::move(array));
    return Status();
  };

  // Which hidden node is the merge copy of which node.
  std::map<int, std::string> merge_of;
  for (const ir::TensorNode& n : program.nodes) {
    const int m = ir::merge_node_of(code->lowered(), n.id);
    if (m >= 0) merge_of[m] = n.name;
  }

  const uint32_t max_workgroups = 4 * std::max(1u, device_->info().capabilities.compute_units);
  LinkedBatch batch;
  batch.context = child;
  uint32_t ordinal = 0;
  for (const ir::LoweredRoutine& lr : code->lowered().routines) {
    const bool wanted = std::find(names.begin(), names.end(), lr.name) != names.end();
    if (!wanted) {
      ordinal += static_cast<uint32_t>(lr.kernels.size());
      continue;
    }
    std::shared_ptr<Routine> routine(new Routine());
    routine->name_ = lr.name;
    routine->context_ = child;
    routine->code_ = code;
    routine->executable_ = executable;
    std::set<std::string> reads, writes;
    for (const ir::Kernel& k : lr.kernels) {
      Routine::Dispatch d;
      d.export_ordinal = ordinal++;
      d.workgroups = options_.max_workgroups
                         ? static_cast<uint32_t>(std::min<int64_t>(codegen::max_workgroups(k), options_.max_workgroups))
                         : codegen::workgroups_for_size(k, max_workgroups);
      const ir::NodeAccess access = ir::node_access(k);
      for (size_t b = 0; b < k.nodes.size(); ++b) {
        const int id = k.nodes[b];
        const std::string& name = program.nodes[id].name;
        d.bindings.push_back(name);
        if (auto m = merge_of.find(id); m != merge_of.end()) {
          d.merge_binding = static_cast<int>(b);
          routine->merge_node_ = m->second;
          routine->merge_bytes_ = static_cast<size_t>(program.nodes[id].byte_size());
          continue;
        }
        KILN_RETURN_IF_ERROR(ensure_array(id));
        if (std::binary_search(access.read.begin(), access.read.end(), id)) reads.insert(name);
        if (std::binary_search(access.written.begin(), access.written.end(), id)) writes.insert(name);
      }
      routine->dispatches_.push_back(std::move(d));
    }
    routine->lowered_ = &lr;
    Result<std::vector<std::shared_ptr<const ral::BoundCall>>> calls = bind_routine_calls(lr, program, *device_);
    if (!calls.ok()) return calls.status().annotate("link");
    routine->calls_ = std::move(*calls);
    if (calls_are_kernels(device_->info())) {
      const size_t index = static_cast<size_t>(&lr - code->lowered().routines.data());
      routine->first_call_ordinal_ = call_export_ordinal(code->lowered(), index, 0);
    }
    for (const auto& call : routine->calls_) {
      const std::vector<int>& tensors = call->tensors();
      for (size_t t = 0; t < tensors.size(); ++t) {
        KILN_RETURN_IF_ERROR(ensure_array(tensors[t]));
        const std::string& name = program.nodes[tensors[t]].name;
        if (call->is_output(t)) writes.insert(name);
        if (!call->is_output(t) || call->reads_outputs()) reads.insert(name);
      }
    }
    routine->reads_.assign(reads.begin(), reads.end());
    routine->writes_.assign(writes.begin(), writes.end());
    batch.routines.push_back(std::move(routine));
  }
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

}  // namespace kiln::runtime
