// The C API (include/kiln/kiln.h) over the C++ runtime: each handle holds shared references to
// the runtime's objects (and to the backend they belong to, which the runtime's contexts only
// point at), every entry point turns a Status into a kiln_status and the thread's last error,
// and no exception crosses into C.
#include "kiln/kiln.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "capi/conversions.h"
#include "kiln/base/file.h"
#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/registry.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"

struct kiln_program {
  kiln::ir::Program program;
  std::vector<std::string> routine_names;
  std::vector<const char*> routine_pointers;
};
struct kiln_tensors {
  std::shared_ptr<kiln::runtime::NodeTable> table;
};
struct kiln_value_trace {
  std::shared_ptr<kiln::runtime::ValueTrace> trace;
};

struct kiln_backend {
  std::shared_ptr<kiln::runtime::Backend> backend;
};
struct kiln_stream {
  std::shared_ptr<kiln::runtime::Backend> backend;
  kiln::runtime::StreamRef stream;
};
struct kiln_code {
  std::shared_ptr<kiln::runtime::Backend> backend;
  kiln::runtime::CodeRef code;
};
struct kiln_context {
  std::shared_ptr<kiln::runtime::Backend> backend;
  kiln::runtime::ContextRef context;
  std::map<std::string, kiln::runtime::RoutineRef, std::less<>> routines;  // linked here
};
struct kiln_call {
  std::string message;  // set by kiln_call_set_error
};
struct kiln_routine {
  std::shared_ptr<kiln::runtime::Backend> backend;
  kiln::runtime::RoutineRef routine;
  // Every input the routine reads was given a value once: it stays given, so later runs skip the check.
  std::atomic<bool> inputs_given{false};
};

namespace kiln::capi {
namespace {

// kiln.h's enums are the C++ ones, value for value.
static_assert(KILN_F32 == static_cast<int>(ir::DType::kF32) && KILN_F64 == static_cast<int>(ir::DType::kF64) &&
              KILN_I32 == static_cast<int>(ir::DType::kI32) && KILN_I64 == static_cast<int>(ir::DType::kI64) &&
              KILN_BOOL == static_cast<int>(ir::DType::kBool) && KILN_I8 == static_cast<int>(ir::DType::kI8) &&
              KILN_U8 == static_cast<int>(ir::DType::kU8) && KILN_I16 == static_cast<int>(ir::DType::kI16) &&
              KILN_U16 == static_cast<int>(ir::DType::kU16) && KILN_U32 == static_cast<int>(ir::DType::kU32) &&
              KILN_U64 == static_cast<int>(ir::DType::kU64) && KILN_F16 == static_cast<int>(ir::DType::kF16) &&
              KILN_BF16 == static_cast<int>(ir::DType::kBF16));
static_assert(KILN_INVALID_ARGUMENT == static_cast<int>(StatusCode::kInvalidArgument) &&
              KILN_NOT_FOUND == static_cast<int>(StatusCode::kNotFound) &&
              KILN_DATA_LOSS == static_cast<int>(StatusCode::kDataLoss));

thread_local std::string last_error;

kiln_status fail(const Status& status) {
  last_error = status.message();
  return static_cast<kiln_status>(status.code());
}

kiln_status report(const Status& status) { return status.ok() ? KILN_OK : fail(status); }


// Runs `body` (returning a Status), turning exceptions into statuses: no C++ exception may
// unwind into C.
template <typename Body>
kiln_status guarded(const char* function, Body&& body) {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return fail(resource_exhausted_error(std::string(function) + ": out of memory"));
  } catch (const std::exception& e) {
    return fail(internal_error(std::string(function) + ": " + e.what()));
  } catch (...) {
    return fail(internal_error(std::string(function) + ": unknown exception"));
  }
}

// Copies up to `capacity` names into `out` and their number into *count.
Status list_names(const std::vector<const char*>& names, const char** out, size_t capacity,
                  size_t* count) {
  if (!count) return invalid_argument_error("count is NULL");
  if (capacity > 0 && !out) return invalid_argument_error("names is NULL but capacity is " + std::to_string(capacity));
  *count = names.size();
  for (size_t i = 0; i < names.size() && i < capacity; ++i) out[i] = names[i];
  return Status();
}

std::string type_text(ir::DType dtype, const int64_t* dims, size_t rank) {
  std::string s = std::string(ir::dtype_name(dtype));
  if (rank == 0) return s;
  s += "[";
  for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Tensor `name` of `tensors`, once dtype, dims and bytes are checked against it.
Result<runtime::HostTensor> checked_tensor(kiln_tensors* tensors, const char* name, kiln_dtype dtype,
                                       const int64_t* dims, size_t rank, const void* data,
                                       size_t bytes) {
  if (!tensors) return invalid_argument_error("tensors is NULL");
  if (!name) return invalid_argument_error("tensor name is NULL");
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, tensors->table->tensor(name));
  const runtime::NodeDesc& desc = tensor.desc();
  const std::string expected = type_text(desc.dtype, desc.dims.data(), desc.dims.size());
  if (rank > 0 && !dims) return invalid_argument_error("tensor '" + desc.name + "': dims is NULL");
  Result<ir::DType> type = to_dtype(dtype);
  if (!type.ok()) return invalid_argument_error("tensor '" + desc.name + "': " + type.status().message());
  const bool same_dims = rank == desc.dims.size() &&
                         std::equal(desc.dims.begin(), desc.dims.end(), dims ? dims : desc.dims.data());
  if (*type != desc.dtype || !same_dims) {
    return invalid_argument_error("tensor '" + desc.name + "': expects " + expected + ", got " +
                                  type_text(*type, dims, rank));
  }
  if (bytes != desc.bytes) {
    return invalid_argument_error("tensor '" + desc.name + "': " + expected + " is " +
                                  std::to_string(desc.bytes) + " bytes, got " + std::to_string(bytes));
  }
  if (bytes > 0 && !data) return invalid_argument_error("tensor '" + desc.name + "': data is NULL");
  return tensor;
}

// The usable devices' names as C strings, for the process's lifetime.
const std::vector<const char*>& device_names() {
  static const std::vector<const char*> pointers = [] {
    std::vector<const char*> out;
    for (const std::string& n : drivers::usable_device_names()) out.push_back(n.c_str());
    return out;
  }();
  return pointers;
}

// Programs larger than this are refused rather than read (as by `kiln run`).
constexpr size_t kMaxProgramBytes = size_t{64} << 20;

template <typename T>
Status set_out(T** out, T* value) {
  *out = value;
  return Status();
}

// A function registered from C, and the invoker that runs it through the RAL.
struct CFunction {
  kiln_call_fn fn;
  void* user;
};

Status invoke_c_function(const ral::Function& function, ral::ExecutionContext&, void** args) {
  const auto* c = static_cast<const CFunction*>(function.user);
  kiln_call call;
  const kiln_status status = c->fn(&call, args, c->user);
  if (status == KILN_OK) return Status();
  const int code = static_cast<int>(status);
  const StatusCode failure = code > 0 && code <= static_cast<int>(StatusCode::kDataLoss)
                                 ? static_cast<StatusCode>(code)
                                 : StatusCode::kUnknown;
  return Status(failure, call.message.empty()
                             ? std::string("returned ") + kiln_status_name(status)
                             : call.message);
}

Status parse_into(std::string_view text, std::string file_name, kiln_program** out) {
  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(text, std::move(file_name)));
  auto handle = std::make_unique<kiln_program>();
  handle->program = std::move(program);
  for (const ir::Routine& r : handle->program.routines) handle->routine_names.push_back(r.name);
  for (const std::string& n : handle->routine_names) handle->routine_pointers.push_back(n.c_str());
  return set_out(out, handle.release());
}

}  // namespace
}  // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

const char* kiln_version(void) { return KILN_VERSION; }

const char* kiln_last_error(void) { return last_error.c_str(); }

const char* kiln_status_name(kiln_status status) {
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"};
  const int i = static_cast<int>(status);
  return i >= 0 && i < static_cast<int>(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "UNKNOWN";
}

kiln_status kiln_devices(const char** names, size_t capacity, size_t* count) {
  return guarded("kiln_devices", [&] { return list_names(device_names(), names, capacity, count); });
}

kiln_status kiln_program_parse(const char* text, const char* file_name, kiln_program** out) {
  return guarded("kiln_program_parse", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!text) return invalid_argument_error("program text is NULL");
    return parse_into(text, file_name ? file_name : "program.kiln", out);
  });
}

kiln_status kiln_program_load(const char* path, kiln_program** out) {
  return guarded("kiln_program_load", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!path) return invalid_argument_error("path is NULL");
    KILN_ASSIGN_OR_RETURN(std::string text, read_bounded_file(path, kMaxProgramBytes, "the program"));
    return parse_into(text, path, out);
  });
}

void kiln_program_free(kiln_program* program) { delete program; }

kiln_status kiln_program_routines(const kiln_program* program, const char** names,
                                  size_t capacity, size_t* count) {
  return guarded("kiln_program_routines", [&]() -> Status {
    if (!program) return invalid_argument_error("program is NULL");
    return list_names(program->routine_pointers, names, capacity, count);
  });
}

kiln_status kiln_tensors_create(const kiln_program* program, uint64_t seed, kiln_tensors** out) {
  return guarded("kiln_tensors_create", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!program) return invalid_argument_error("program is NULL");
    KILN_ASSIGN_OR_RETURN(auto table, runtime::NodeTable::create(program->program, seed));
    return set_out(out, new kiln_tensors{std::move(table)});
  });
}

void kiln_tensors_free(kiln_tensors* tensors) { delete tensors; }

kiln_status kiln_tensor_shape(kiln_tensors* tensors, const char* name, kiln_dtype* dtype,
                              int64_t* dims, size_t capacity, size_t* rank) {
  return guarded("kiln_tensor_shape", [&]() -> Status {
    if (!tensors) return invalid_argument_error("tensors is NULL");
    if (!name) return invalid_argument_error("tensor name is NULL");
    if (!rank) return invalid_argument_error("rank is NULL");
    if (capacity > 0 && !dims) return invalid_argument_error("dims is NULL but capacity is " + std::to_string(capacity));
    KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, tensors->table->tensor(name));
    const runtime::NodeDesc& desc = tensor.desc();
    if (dtype) *dtype = static_cast<kiln_dtype>(desc.dtype);
    *rank = desc.dims.size();
    for (size_t i = 0; i < desc.dims.size() && i < capacity; ++i) dims[i] = desc.dims[i];
    return Status();
  });
}

kiln_status kiln_tensor_write(kiln_tensors* tensors, const char* name, kiln_dtype dtype,
                              const int64_t* dims, size_t rank, const void* data, size_t bytes) {
  return guarded("kiln_tensor_write", [&]() -> Status {
    if (tensors && name) {
      KILN_ASSIGN_OR_RETURN(runtime::HostTensor sized, tensors->table->tensor(name));
      if (!sized.desc().sized_dims.empty()) {
        // Any dims of its rank: the write checks them and binds the sizes they name.
        const std::string where = "tensor '" + sized.desc().name + "'";
        if (rank > 0 && !dims) return invalid_argument_error(where + ": dims is NULL");
        Result<ir::DType> type = to_dtype(dtype);
        if (!type.ok()) return invalid_argument_error(where + ": " + type.status().message());
        if (*type != sized.desc().dtype) {
          return invalid_argument_error(where + " holds " + std::string(ir::dtype_name(sized.desc().dtype)) +
                                        " elements, got " + std::string(ir::dtype_name(*type)));
        }
        if (bytes > 0 && !data) return invalid_argument_error(where + ": data is NULL");
        return sized.write({static_cast<const std::byte*>(data), bytes}, std::vector<int64_t>(dims, dims + rank));
      }
    }
    KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor,
                          checked_tensor(tensors, name, dtype, dims, rank, data, bytes));
    return tensor.write({static_cast<const std::byte*>(data), bytes});
  });
}

kiln_status kiln_size_set(kiln_tensors* tensors, const char* name, int64_t value) {
  return guarded("kiln_size_set", [&]() -> Status {
    if (!tensors) return invalid_argument_error("tensors is NULL");
    if (!name) return invalid_argument_error("size name is NULL");
    return tensors->table->set_sizes({{name, value}});
  });
}

kiln_status kiln_size_get(kiln_tensors* tensors, const char* name, int64_t* value) {
  return guarded("kiln_size_get", [&]() -> Status {
    if (!tensors) return invalid_argument_error("tensors is NULL");
    if (!name) return invalid_argument_error("size name is NULL");
    if (!value) return invalid_argument_error("value is NULL");
    const std::vector<std::string> names = tensors->table->size_names();
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) return not_found_error("size '" + std::string(name) + "': the program declares no such size");
    *value = tensors->table->size_values()[static_cast<size_t>(it - names.begin())];
    return Status();
  });
}

kiln_status kiln_tensor_read(kiln_tensors* tensors, const char* name, kiln_dtype dtype,
                             const int64_t* dims, size_t rank, void* data, size_t bytes) {
  return guarded("kiln_tensor_read", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor,
                          checked_tensor(tensors, name, dtype, dims, rank, data, bytes));
    return tensor.read({static_cast<std::byte*>(data), bytes});
  });
}

namespace {

Status create_backend(const char* device, std::shared_ptr<runtime::ValueTrace> trace, kiln_backend** out) {
  if (!out) return invalid_argument_error("out is NULL");
  *out = nullptr;
  if (!device) return invalid_argument_error("device name is NULL");
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef d, drivers::builtin_registry().create_device(device));
  runtime::BackendOptions options;
  options.value_trace = std::move(trace);
  KILN_ASSIGN_OR_RETURN(auto backend, runtime::Backend::create(std::move(d), options));
  return set_out(out, new kiln_backend{std::move(backend)});
}

}  // namespace

kiln_status kiln_backend_create(const char* device, kiln_backend** out) {
  return guarded("kiln_backend_create", [&]() -> Status { return create_backend(device, nullptr, out); });
}

kiln_status kiln_backend_create_traced(const char* device, kiln_value_trace* trace, kiln_backend** out) {
  return guarded("kiln_backend_create_traced", [&]() -> Status {
    if (!trace && out) *out = nullptr;
    if (!trace) return invalid_argument_error("trace is NULL");
    return create_backend(device, trace->trace, out);
  });
}

kiln_status kiln_value_trace_start(kiln_value_trace** out) {
  return guarded("kiln_value_trace_start", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::ValueTrace> trace, runtime::ValueTrace::start());
    return set_out(out, new kiln_value_trace{std::move(trace)});
  });
}

kiln_status kiln_value_trace_write(kiln_value_trace* trace, const char* path) {
  return guarded("kiln_value_trace_write", [&]() -> Status {
    if (!trace) return invalid_argument_error("trace is NULL");
    if (!path) return invalid_argument_error("path is NULL");
    return trace->trace->write_json_lines(path);
  });
}

void kiln_value_trace_free(kiln_value_trace* trace) {
  if (trace) (void)trace->trace->stop();
  delete trace;
}

void kiln_backend_free(kiln_backend* backend) { delete backend; }

kiln_status kiln_backend_await(kiln_backend* backend) {
  return guarded("kiln_backend_await", [&]() -> Status {
    if (!backend) return invalid_argument_error("backend is NULL");
    return backend->backend->await();
  });
}

kiln_status kiln_stream_create(kiln_backend* backend, kiln_stream** out) {
  return guarded("kiln_stream_create", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!backend) return invalid_argument_error("backend is NULL");
    KILN_ASSIGN_OR_RETURN(runtime::StreamRef stream, backend->backend->new_stream());
    return set_out(out, new kiln_stream{backend->backend, std::move(stream)});
  });
}

void kiln_stream_free(kiln_stream* stream) { delete stream; }

kiln_status kiln_stream_await(kiln_stream* stream) {
  return guarded("kiln_stream_await", [&]() -> Status {
    if (!stream) return invalid_argument_error("stream is NULL");
    return stream->stream->await();
  });
}

kiln_status kiln_compile(kiln_backend* backend, const kiln_program* program,
                         const char* const* routines, size_t count, int shared, kiln_code** out) {
  return guarded("kiln_compile", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!backend) return invalid_argument_error("backend is NULL");
    if (!program) return invalid_argument_error("program is NULL");
    if (count > 0 && !routines) return invalid_argument_error("routines is NULL but count is " + std::to_string(count));
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      if (!routines[i]) return invalid_argument_error("routine name " + std::to_string(i) + " is NULL");
      names.emplace_back(routines[i]);
    }
    if (count == 0) names = program->routine_names;
    runtime::CompileOptions options;
    options.shared = shared != 0;
    if (const auto& trace = backend->backend->options().value_trace) {
      options.lower.trace_values = true;
      options.lower.trace_lines = trace->lines_per_statement();
    }
    KILN_ASSIGN_OR_RETURN(runtime::CodeRef code,
                          backend->backend->compile_batch(program->program, names, options));
    return set_out(out, new kiln_code{backend->backend, std::move(code)});
  });
}

kiln_status kiln_compile_kernels(kiln_backend* backend, const kiln_program* program,
                                 const kiln_kernel_set* kernels, int shared, kiln_code** out) {
  return guarded("kiln_compile_kernels", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!backend) return invalid_argument_error("backend is NULL");
    if (!program) return invalid_argument_error("program is NULL");
    if (!kernels) return invalid_argument_error("kernels is NULL");
    KILN_ASSIGN_OR_RETURN(runtime::KernelSet set, to_kernel_set(*kernels));
    runtime::CompileOptions options;
    options.shared = shared != 0;
    KILN_ASSIGN_OR_RETURN(runtime::CodeRef code,
                          backend->backend->compile_kernels(program->program, std::move(set), options));
    return set_out(out, new kiln_code{backend->backend, std::move(code)});
  });
}

void kiln_code_free(kiln_code* code) { delete code; }

kiln_status kiln_context_create(kiln_backend* backend, kiln_stream* stream, kiln_tensors* tensors,
                                kiln_context** out) {
  return guarded("kiln_context_create", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!backend || !stream || !tensors) return invalid_argument_error("backend, stream or tensors is NULL");
    if (stream->backend != backend->backend) {
      return invalid_argument_error("stream '" + stream->stream->name() + "' belongs to another backend");
    }
    KILN_ASSIGN_OR_RETURN(runtime::ContextRef context,
                          backend->backend->make_context(stream->stream, tensors->table));
    return set_out(out, new kiln_context{backend->backend, std::move(context), {}});
  });
}

kiln_status kiln_link(kiln_context* parent, kiln_code* code, kiln_context** out) {
  return guarded("kiln_link", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!parent || !code) return invalid_argument_error("parent context or code is NULL");
    KILN_ASSIGN_OR_RETURN(runtime::LinkedBatch linked,
                          parent->backend->link_batch(parent->context, code->code));
    auto handle = std::make_unique<kiln_context>();
    handle->backend = parent->backend;
    handle->context = std::move(linked.context);
    for (runtime::RoutineRef& r : linked.routines) handle->routines[r->name()] = std::move(r);
    return set_out(out, handle.release());
  });
}

void kiln_context_free(kiln_context* context) { delete context; }

kiln_status kiln_routine_find(kiln_context* context, const char* name, kiln_routine** out) {
  return guarded("kiln_routine_find", [&]() -> Status {
    if (!out) return invalid_argument_error("out is NULL");
    *out = nullptr;
    if (!context || !name) return invalid_argument_error("context or routine name is NULL");
    auto it = context->routines.find(std::string_view(name));
    if (it == context->routines.end()) {
      std::string known;
      for (const auto& [n, r] : context->routines) known += (known.empty() ? "" : ", ") + n;
      return not_found_error("no routine '" + std::string(name) + "' linked in this context" +
                             (known.empty() ? " (it was made by kiln_context_create, not kiln_link)"
                                            : " (linked: " + known + ")"));
    }
    return set_out(out, new kiln_routine{context->backend, it->second, false});
  });
}

void kiln_routine_free(kiln_routine* routine) { delete routine; }

kiln_status kiln_routine_run(kiln_routine* routine) {
  return guarded("kiln_routine_run", [&]() -> Status {
    if (!routine) return invalid_argument_error("routine is NULL");
    if (!routine->inputs_given.load(std::memory_order_relaxed)) {
      const runtime::Routine& r = *routine->routine;
      KILN_RETURN_IF_ERROR(r.context()->nodes()->check_inputs_given(r.reads(), r.name()));
      routine->inputs_given.store(true, std::memory_order_relaxed);
    }
    return routine->routine->run();
  });
}

kiln_status kiln_device_to_device(const char* node, kiln_merge mode, kiln_context* dst,
                                  kiln_context* src) {
  return guarded("kiln_device_to_device", [&]() -> Status {
    if (!node || !dst || !src) return invalid_argument_error("node, dst or src is NULL");
    runtime::MergeMode merge;
    switch (mode) {
      case KILN_MERGE_NO: merge = runtime::MergeMode::kNo; break;
      case KILN_MERGE_COPY: merge = runtime::MergeMode::kCopy; break;
      case KILN_MERGE_STREAMING: merge = runtime::MergeMode::kStreaming; break;
      default: return invalid_argument_error("merge mode " + std::to_string(static_cast<int>(mode)) + " is not a kiln_merge");
    }
    return runtime::device_to_device(node, merge, dst->context, src->context).status();
  });
}

kiln_status kiln_register_call(const char* name, const char* device, const char* arguments,
                               kiln_call_fn fn, void* user) {
  return guarded("kiln_register_call", [&]() -> Status {
    if (!name || !device || !arguments || !fn) {
      return invalid_argument_error("name, device, arguments or fn is NULL");
    }
    ral::Function function;
    function.nickname = name;
    function.device = device;
    function.full_name = function.nickname + "___" + function.device + "___pvoid" +
                         (*arguments ? "_" + std::string(arguments) : "") + "___void";
    function.invoke = &invoke_c_function;
    // Lives as long as the registry's functions: the process.
    auto c = std::make_unique<CFunction>(CFunction{fn, user});
    function.user = c.get();
    KILN_RETURN_IF_ERROR(ral::Registry::global().add(std::move(function)));
    c.release();
    return Status();
  });
}

void kiln_call_set_error(kiln_call* call, const char* message) {
  if (call) call->message = message ? message : "";
}

kiln_status kiln_world_rank(int32_t* rank) {
  return guarded("kiln_world_rank", [&]() -> Status {
    if (!rank) return invalid_argument_error("rank is NULL");
    KILN_ASSIGN_OR_RETURN(ral::World * world, ral::world());
    *rank = world->rank();
    return Status();
  });
}

kiln_status kiln_world_size(int32_t* size) {
  return guarded("kiln_world_size", [&]() -> Status {
    if (!size) return invalid_argument_error("size is NULL");
    KILN_ASSIGN_OR_RETURN(ral::World * world, ral::world());
    *size = world->size();
    return Status();
  });
}

kiln_status kiln_world_describe(const char** text) {
  return guarded("kiln_world_describe", [&]() -> Status {
    if (!text) return invalid_argument_error("text is NULL");
    KILN_ASSIGN_OR_RETURN(ral::World * world, ral::world());
    // The world is made once and lives for the process; so does its description.
    static const std::string description = world->describe();
    *text = description.c_str();
    return Status();
  });
}

kiln_status kiln_world_use_mpi_comm(const void* mpi_comm) {
  return guarded("kiln_world_use_mpi_comm", [&] { return ral::use_communicator(mpi_comm); });
}

}  // extern "C"
