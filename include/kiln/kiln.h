/* kiln.h: the C API of kiln (C99; also C++).
 *
 * A thin layer over the C++ runtime (kiln/runtime/backend.h), for frameworks written in C, OCaml,
 * Rust, Python and anything else with a C foreign-function interface. What it offers:
 *   - devices (kiln_devices), programs in kiln's language (kiln_program_parse / _load),
 *   - the host copies of a program's tensors (kiln_tensors: write before a run, read after),
 *   - backends on a device and their streams, code compiled from a program's routines, contexts
 *     that link the code to buffers on a stream, routines run asynchronously, and waits,
 *   - moving a node between contexts for data-parallel work (kiln_device_to_device),
 *   - a framework's own kernels, compiled into code that links and runs like kiln's
 *     (kiln_compile_kernels),
 *   - the processes of a job started by mpirun, for programs with collectives (kiln_world_*).
 *
 * Errors. Every function that can fail returns a kiln_status: KILN_OK (0) or the kind of the
 * failure. kiln_last_error() then returns the message of the last failure on the calling thread
 * ("tensor 'x': expects f32[4, 10], got f32[4, 9]"; a program's diagnostics as
 * FILE:LINE:COL: error: ..., one per line). A successful call does not clear it. No function
 * aborts the process on bad input: null handles and pointers, unknown names, wrong dtypes,
 * shapes and sizes are KILN_INVALID_ARGUMENT (or KILN_NOT_FOUND for a name that is not there).
 *
 * Ownership. Every handle that a function returns through an out-parameter belongs to the caller,
 * who frees it with its kiln_*_free function (which accepts NULL). Handles are references: an
 * object stays alive while something else still needs it (a routine keeps its context, a
 * context its backend and stream, a backend waits for its streams when the last reference
 * goes), so handles may be freed in any order. Strings returned as `const char*` belong to kiln
 * and live as long as the object they came from (kiln_devices: the whole process).
 *
 * Threads. Every function may be called from any thread, and a backend may be used from several
 * threads at once. A handle must not be freed while another thread still uses it.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/* The enums are given as int32_t: a value from a caller (or a callback) that names no member
 * is then an error kiln reports, not undefined behaviour in the library. */

/* The kinds of failure (the same as the C++ API's kiln::StatusCode). */
typedef int32_t kiln_status;
enum kiln_status_code {
  KILN_OK = 0,
  KILN_CANCELLED = 1,
  KILN_UNKNOWN = 2,
  KILN_INVALID_ARGUMENT = 3,
  KILN_DEADLINE_EXCEEDED = 4,
  KILN_NOT_FOUND = 5,
  KILN_ALREADY_EXISTS = 6,
  KILN_PERMISSION_DENIED = 7,
  KILN_RESOURCE_EXHAUSTED = 8,
  KILN_FAILED_PRECONDITION = 9,
  KILN_ABORTED = 10,
  KILN_OUT_OF_RANGE = 11,
  KILN_UNIMPLEMENTED = 12,
  KILN_INTERNAL = 13,
  KILN_UNAVAILABLE = 14,
  KILN_DATA_LOSS = 15
};

/* Element types of tensors (docs/language.md, "Element types"). Values are stored as C stores
 * them, in host byte order: KILN_BOOL one byte holding 0 or 1, KILN_F16 the 16 bits of an IEEE
 * binary16, KILN_BF16 the 16 bits of a bfloat16 (the top half of an f32; uint16_t in C). */
typedef int32_t kiln_dtype;
enum kiln_dtype_code {
  KILN_F32 = 0,
  KILN_F64 = 1,
  KILN_I32 = 2,
  KILN_I64 = 3,
  KILN_BOOL = 4,
  KILN_I8 = 5,
  KILN_U8 = 6,
  KILN_I16 = 7,
  KILN_U16 = 8,
  KILN_U32 = 9,
  KILN_U64 = 10,
  KILN_F16 = 11,
  KILN_BF16 = 12
};

/* Where kiln_device_to_device puts the source's array (docs/runtime.md, "Transfers"). */
typedef int32_t kiln_merge;
enum kiln_merge_code {
  KILN_MERGE_NO = 0,        /* into the destination's own array of the node */
  KILN_MERGE_COPY = 1,      /* into the destination stream's merge buffer */
  KILN_MERGE_STREAMING = 2  /* the destination's routines read the source's array (same device) */
};

typedef struct kiln_program kiln_program;
typedef struct kiln_tensors kiln_tensors;
typedef struct kiln_backend kiln_backend;
typedef struct kiln_stream kiln_stream;
typedef struct kiln_code kiln_code;
typedef struct kiln_context kiln_context;
typedef struct kiln_routine kiln_routine;
typedef struct kiln_value_trace kiln_value_trace;

/* "0.1.0": the version of the library (also `kiln --version`). */
KILN_API const char* kiln_version(void);
/* The message of the last failed call on this thread; "" before any failure. */
KILN_API const char* kiln_last_error(void);
/* "INVALID_ARGUMENT" for KILN_INVALID_ARGUMENT, ...; "UNKNOWN" for a value that is none. */
KILN_API const char* kiln_status_name(kiln_status status);

/* --- Devices ----------------------------------------------------------------------------------
 * The devices that can be used here, as names for kiln_backend_create ("cpu", "interp",
 * "opencl", "opencl:1", ...): *count receives how many there are, and the first min(capacity,
 * count) are stored in names (names may be NULL when capacity is 0). */
KILN_API kiln_status kiln_devices(const char** names, size_t capacity, size_t* count);

/* --- Programs ---------------------------------------------------------------------------------
 * A program in kiln's language (docs/language.md). file_name (may be NULL: "program.kiln") is
 * what diagnostics name. */
KILN_API kiln_status kiln_program_parse(const char* text, const char* file_name, kiln_program** out);
KILN_API kiln_status kiln_program_load(const char* path, kiln_program** out);
KILN_API void kiln_program_free(kiln_program* program);
/* The program's routines, in order, as for kiln_devices. */
KILN_API kiln_status kiln_program_routines(const kiln_program* program, const char** names,
                                           size_t capacity, size_t* count);

/* --- Tensors ----------------------------------------------------------------------------------
 * The host side of every tensor node of a program: params start from their initializers
 * (random ones from `seed`), everything else 0. Contexts made over the same kiln_tensors share
 * these host copies; the runtime uploads what the host wrote before a routine that reads it
 * runs, and a read waits for the last routine that writes the node and copies it back. */
KILN_API kiln_status kiln_tensors_create(const kiln_program* program, uint64_t seed, kiln_tensors** out);
KILN_API void kiln_tensors_free(kiln_tensors* tensors);
/* The dtype and dims of tensor `name`: *rank receives its rank, and the first min(capacity,
 * rank) dims are stored in dims. For a tensor whose dimensions name sizes (language version 2),
 * its shape at the bound sizes (a size not bound yet counts as 0). */
KILN_API kiln_status kiln_tensor_shape(kiln_tensors* tensors, const char* name, kiln_dtype* dtype,
                                       int64_t* dims, size_t capacity, size_t* rank);
/* Copies `bytes` bytes of row-major elements in or out of tensor `name`. dtype, dims (rank
 * entries) and bytes must be the tensor's own: anything else is KILN_INVALID_ARGUMENT naming the
 * tensor and what it expects, and nothing is copied. A scalar has rank 0 (dims may be NULL).
 * Sizes (language version 2): kiln_tensor_write accepts any dims that fit a tensor whose
 * dimensions name sizes and binds those sizes (a tensor of the others' sizes starts from zeros
 * at its new shape); a size already set for this run (since the last routine run, by
 * kiln_size_set or another write) that the dims contradict is KILN_INVALID_ARGUMENT naming the
 * tensor, the dimension, the size and both values. kiln_tensor_read takes the bound shape. */
KILN_API kiln_status kiln_tensor_write(kiln_tensors* tensors, const char* name, kiln_dtype dtype,
                                       const int64_t* dims, size_t rank, const void* data,
                                       size_t bytes);
KILN_API kiln_status kiln_tensor_read(kiln_tensors* tensors, const char* name, kiln_dtype dtype,
                                      const int64_t* dims, size_t rank, void* data, size_t bytes);
/* A size of the program (language version 2) by name: kiln_size_set binds it (0 or more; tensors
 * whose shapes change start from zeros), kiln_size_get gives its value, -1 while not bound.
 * KILN_NOT_FOUND for a size the program does not declare. */
KILN_API kiln_status kiln_size_set(kiln_tensors* tensors, const char* name, int64_t value);
KILN_API kiln_status kiln_size_get(kiln_tensors* tensors, const char* name, int64_t* value);

/* --- Backends and streams ---------------------------------------------------------------------
 * A backend is the runtime over one device (a name from kiln_devices); a stream is one of its
 * queues, on which routines and transfers run in order. */
KILN_API kiln_status kiln_backend_create(const char* device, kiln_backend** out);
/* A backend whose code (kiln_compile) is compiled with value tracing and whose routine runs log
 * what they compute into `trace` (see "Value tracing" below); `trace` must outlive it. */
KILN_API kiln_status kiln_backend_create_traced(const char* device, kiln_value_trace* trace,
                                                kiln_backend** out);
KILN_API void kiln_backend_free(kiln_backend* backend);
/* Blocks until every stream of the backend is idle; the first failure of their work if any. */
KILN_API kiln_status kiln_backend_await(kiln_backend* backend);
KILN_API kiln_status kiln_stream_create(kiln_backend* backend, kiln_stream** out);
KILN_API void kiln_stream_free(kiln_stream* stream);
KILN_API kiln_status kiln_stream_await(kiln_stream* stream);

/* --- Value tracing (docs/tracing.md) ------------------------------------------------------
 * kiln_value_trace_start starts capturing the process's standard output: lines printed by the
 * kernels of traced backends go into the trace, every other line reaches standard output
 * unchanged. One at a time per process (KILN_FAILED_PRECONDITION otherwise). After awaiting the
 * backends, kiln_value_trace_write writes the trace as JSON lines to `path`;
 * kiln_value_trace_free stops capturing. */
KILN_API kiln_status kiln_value_trace_start(kiln_value_trace** out);
KILN_API kiln_status kiln_value_trace_write(kiln_value_trace* trace, const char* path);
KILN_API void kiln_value_trace_free(kiln_value_trace* trace);

/* --- Compiling, linking, running --------------------------------------------------------------
 * kiln_compile lowers and compiles `count` routines of `program` (all of them when count is 0)
 * for the backend's device. With `shared` non-zero the code may be linked on other backends
 * too. kiln_context_create makes a root context on `stream` over `tensors`; kiln_link links
 * every routine of `code` into a new child context of `parent` (buffers found in the context
 * tree or allocated), and kiln_routine_find takes one of them by name. */
KILN_API kiln_status kiln_compile(kiln_backend* backend, const kiln_program* program,
                                  const char* const* routines, size_t count, int shared,
                                  kiln_code** out);
KILN_API void kiln_code_free(kiln_code* code);
KILN_API kiln_status kiln_context_create(kiln_backend* backend, kiln_stream* stream,
                                         kiln_tensors* tensors, kiln_context** out);
KILN_API kiln_status kiln_link(kiln_context* parent, kiln_code* code, kiln_context** out);
KILN_API void kiln_context_free(kiln_context* context);
KILN_API kiln_status kiln_routine_find(kiln_context* context, const char* name, kiln_routine** out);
KILN_API void kiln_routine_free(kiln_routine* routine);
/* Schedules the routine on its context's stream and returns at once (a routine too small to hand
 * to another thread, whose waits are met, runs on the calling thread first); its failure, if
 * any, comes back from the next await of that stream or backend, or from a read that waits for it. */
KILN_API kiln_status kiln_routine_run(kiln_routine* routine);

/* Schedules `src`'s array of node `node` into `dst` (see kiln_merge), after the last routine of
 * src's stream that writes it and before dst's next routines that read it. */
KILN_API kiln_status kiln_device_to_device(const char* node, kiln_merge mode, kiln_context* dst,
                                           kiln_context* src);

/* --- A framework's own kernels (docs/capi.md, "Your own kernels from C") -----------------------
 * A framework with its own code generator hands kiln kernels in a driver's format ("c" for the
 * cpu device, "opencl-c" for OpenCL devices; the kernel ABI of each is in docs/runtime.md, "Your
 * own kernels") and routines that dispatch them over the nodes of a program. kiln_compile_kernels
 * checks the description against `program` and builds the source for the backend's device; the
 * code it returns is linked by kiln_link like compiled code, and its routines run on the
 * context's stream, ordered against kiln's routines and transfers by the same per-node
 * semaphores. Every pointer in the description is read during the call only. */

/* What a kernel does with a node it binds: reads wait for the node's last writer, writes for the
 * last writer and the readers since. KILN_WRITE: nothing is uploaded before the kernel runs, so
 * declare KILN_READ_WRITE for a node the kernel writes only in part. */
typedef int32_t kiln_access;
enum kiln_access_code { KILN_READ = 0, KILN_WRITE = 1, KILN_READ_WRITE = 2 };

/* One export of the source: a kernel's name, how many buffers it binds and push constants it
 * takes, and (opencl-c) whether it is correct for any number of work items per workgroup. */
typedef struct kiln_kernel_export {
  const char* name;
  uint32_t binding_count;
  uint32_t constant_count;
  int32_t any_local_size;
} kiln_kernel_export;

/* One buffer binding of a dispatch: the node, the dtype and dims (rank of them; a scalar has rank
 * 0) the kernel was generated for, which must be the node's, and its access. With `merge`
 * non-zero the binding is the node's merge copy (`x.merge`): the merge buffer of the stream the
 * routine runs on, which kiln_device_to_device with KILN_MERGE_COPY or KILN_MERGE_STREAMING
 * filled; it is read only (KILN_READ), a dispatch binds at most one, and a routine's merge
 * bindings all name one node. */
typedef struct kiln_kernel_binding {
  const char* node;
  kiln_dtype dtype;
  const int64_t* dims;
  size_t rank;
  kiln_access access;
  int32_t merge;
} kiln_kernel_binding;

/* One dispatch: an export by name, its 3-D workgroup count, its bindings in the export's order
 * and its push constants. */
typedef struct kiln_kernel_dispatch {
  const char* kernel;
  uint32_t workgroups[3];
  const kiln_kernel_binding* bindings;
  size_t binding_count;
  const uint32_t* constants;
  size_t constant_count;
} kiln_kernel_dispatch;

/* A routine: its dispatches run in order, each after the previous one has finished. */
typedef struct kiln_kernel_routine {
  const char* name;
  const kiln_kernel_dispatch* dispatches;
  size_t dispatch_count;
} kiln_kernel_routine;

/* The source (NUL-terminated) in `format`, its exports, and the routines (distinct names).
 * `label` names the set in errors (NULL: "kernels"). */
typedef struct kiln_kernel_set {
  const char* format;
  const char* source;
  const char* label;
  const kiln_kernel_export* exports;
  size_t export_count;
  const kiln_kernel_routine* routines;
  size_t routine_count;
} kiln_kernel_set;

/* The kernels of `kernels` over the nodes of `program`, built for the backend's device now (with
 * `shared` non-zero, for other backends' devices at their first kiln_link). Errors, with the
 * message naming the routine, dispatch, kernel and node: KILN_INVALID_ARGUMENT for NULL where a
 * pointer is needed, a dtype or access that is none of the enums', a dtype or dims other than the
 * node's, binding or constant counts other than the export's, a workgroup count of 0, routine
 * names that are empty or repeated, a merge binding that is not KILN_READ, two merge bindings in
 * one dispatch or merge bindings of two nodes in one routine; KILN_NOT_FOUND for a dispatch of an
 * export the set does not declare or a node the program lacks; KILN_UNIMPLEMENTED for a format
 * the device does not build; KILN_INVALID_ARGUMENT with the compiler's output for a source that
 * does not compile. kiln_link then also refuses a node the context's tensors lack
 * (KILN_NOT_FOUND) and a write to a const (KILN_INVALID_ARGUMENT). */
KILN_API kiln_status kiln_compile_kernels(kiln_backend* backend, const kiln_program* program,
                                          const kiln_kernel_set* kernels, int shared, kiln_code** out);

/* --- Custom calls -------------------------------------------------------------------------------
 * A function of the host program that `call` statements can call (docs/ral.md, "Custom
 * functions"). kiln_register_call registers `fn` for `device` ("cpu", "interp", "opencl") under
 * the full name NAME___DEVICE___pvoid_ARGUMENTS___void: `arguments` are the type codes of what
 * follows the context, joined by "_" (a memref of rank N and type T is mNdT, an attribute f64;
 * T is i1 for bool, i8 ui8 i16 ui16 i32 ui32 i64 ui64, f16 bf16 f32 f64), so
 * `call my_clip(x, limit=6) -> y` on f32 vectors is ("my_clip", "cpu", "m1df32_m1df32_f64").
 * KILN_ALREADY_EXISTS for a full name registered before; registrations last for the process.
 *
 * When the routine runs, fn(call, args, user) gets `args` as compiled code passes them
 * (kiln/ral/abi.h): args[0] points to the context pointer, then one pointer per argument in the
 * order of `arguments`, each pointing to the value (a memref: kiln_ral_memref(N), the data
 * pointer and N int64 sizes). Return KILN_OK, or a failure with kiln_call_set_error() for its
 * message: the routine fails with it. fn may run on several threads at once, must not keep
 * pointers into the memrefs past its return, and must not call back into kiln. */
typedef struct kiln_call kiln_call;
typedef kiln_status (*kiln_call_fn)(kiln_call* call, void** args, void* user);
KILN_API kiln_status kiln_register_call(const char* name, const char* device, const char* arguments,
                                        kiln_call_fn fn, void* user);
/* The message of the failure that the running call is about to return. */
KILN_API void kiln_call_set_error(kiln_call* call, const char* message);

/* --- The job's processes (docs/capi.md, "Collectives from C") -----------------------------------
 * A program's collectives (allreduce, allgather, reduce_scatter, broadcast, rank, world_size)
 * combine tensors across the processes that mpirun started, one rank each. The world is made the
 * first time one of kiln_world_rank, kiln_world_size or kiln_world_describe is called or a
 * collective runs: under mpirun, kiln initializes MPI then unless the host program already has;
 * a process started alone is rank 0 of a world of one and never touches MPI.
 * kiln_world_rank and kiln_world_size store this process's rank (0 to size - 1) and the number of
 * ranks; kiln_world_describe stores a line that says which world it is ("a world of one (not
 * started by mpirun)", "MPI rank 1 of 4 (Open MPI v4.1.4)"), a string that lives for the
 * process. Their failures: KILN_UNIMPLEMENTED where mpirun started several ranks but kiln was built
 * without MPI; KILN_UNAVAILABLE or KILN_FAILED_PRECONDITION where MPI cannot be initialized as
 * kiln needs (the message says why).
 * kiln_world_use_mpi_comm hands kiln the communicator to run its collectives on, for a host that
 * manages MPI itself: `mpi_comm` points to the caller's MPI_Comm (so that kiln.h needs no mpi.h),
 * which must stay valid for the rest of the process (kiln works on a duplicate of it). Call it
 * before the world is made; after, it is KILN_FAILED_PRECONDITION. KILN_UNIMPLEMENTED where kiln
 * was built without MPI; KILN_INVALID_ARGUMENT for NULL. */
KILN_API kiln_status kiln_world_rank(int32_t* rank);
KILN_API kiln_status kiln_world_size(int32_t* size);
KILN_API kiln_status kiln_world_describe(const char** text);
KILN_API kiln_status kiln_world_use_mpi_comm(const void* mpi_comm);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H_ */
