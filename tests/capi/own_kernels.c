/* A framework's own kernels through the C API, from plain C99 (kiln_compile_kernels): a kernel
 * run between kiln's routines on one stream, a kernel that adds the merge buffer another stream's
 * array was copied into, and every kind of bad description with the status and message it gets.
 * Run as `kiln_capi_own_kernels_test DEVICE`: the cpu device builds the "c" kernels, opencl the
 * "opencl-c" ones; interp builds neither (KILN_UNIMPLEMENTED), and there only the errors that do
 * not need building are checked. Exits 77 (skipped) where the device is not there. */
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "kiln/kiln.h"

#define N 16

static const char* kProgram =
    "input  x : f32[16]\n"
    "param  a : f32[16]\n"
    "param  b : f32[16]\n"
    "output y : f32[16]\n"
    "routine before {\n"
    "  a[i] = x[i] * 2\n"
    "}\n"
    "routine after {\n"
    "  y[i] = b[i] + x[i]\n"
    "}\n";

/* reverse_scale: b[i] = a[n - 1 - i] * constant 0, one workgroup per element. add_merge:
 * b[i] += (b's merge copy)[i], one workgroup. */
static const char* kCKernels =
    "int reverse_scale(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {\n"
    "  const float* a = (const float*)s->bindings[0];\n"
    "  float* b = (float*)s->bindings[1];\n"
    "  uint32_t n = (uint32_t)(s->binding_lengths[1] / sizeof(float));\n"
    "  b[id->x] = a[n - 1 - id->x] * (float)s->constants[0];\n"
    "  return 0;\n"
    "}\n"
    "int add_merge(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {\n"
    "  float* b = (float*)s->bindings[0];\n"
    "  const float* merged = (const float*)s->bindings[1];\n"
    "  for (uint64_t i = 0; i < s->binding_lengths[0] / sizeof(float); ++i) b[i] += merged[i];\n"
    "  return 0;\n"
    "}\n";

static const char* kOpenCLKernels =
    "__kernel void reverse_scale(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),\n"
    "                            KILN_CONSTANT_PARAM(0)) {\n"
    "  KILN_ENTRY();\n"
    "  const __global float* a = KILN_BINDING(const float, 0);\n"
    "  __global float* b = KILN_BINDING(float, 1);\n"
    "  uint n = (uint)(KILN_BINDING_LENGTH(1) / sizeof(float));\n"
    "  uint i = (uint)get_group_id(0);\n"
    "  b[i] = a[n - 1 - i] * (float)KILN_CONSTANT(0);\n"
    "}\n"
    "__kernel void add_merge(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1)) {\n"
    "  KILN_ENTRY();\n"
    "  __global float* b = KILN_BINDING(float, 0);\n"
    "  const __global float* merged = KILN_BINDING(const float, 1);\n"
    "  for (ulong i = 0; i < KILN_BINDING_LENGTH(0) / sizeof(float); ++i) b[i] += merged[i];\n"
    "}\n";

static const int64_t kDims[1] = {N};
static const uint32_t kScale[1] = {3};

/* The description, in arrays the error cases change one field of (and put back). */
static kiln_kernel_export exports[2] = {{"reverse_scale", 2, 1, 0}, {"add_merge", 2, 0, 0}};
static kiln_kernel_binding reverse_bindings[2] = {{"a", KILN_F32, kDims, 1, KILN_READ, 0},
                                                  {"b", KILN_F32, kDims, 1, KILN_WRITE, 0}};
static kiln_kernel_binding merge_bindings[2] = {{"b", KILN_F32, kDims, 1, KILN_READ_WRITE, 0},
                                                {"b", KILN_F32, kDims, 1, KILN_READ, 1}};
static kiln_kernel_dispatch dispatches[2] = {{"reverse_scale", {N, 1, 1}, reverse_bindings, 2, kScale, 1},
                                             {"add_merge", {1, 1, 1}, merge_bindings, 2, NULL, 0}};
static kiln_kernel_routine routines[2] = {{"reverse", &dispatches[0], 1}, {"merge_b", &dispatches[1], 1}};
static kiln_kernel_set kernels = {NULL, NULL, "framework_kernels", exports, 2, routines, 2};

/* kiln_compile_kernels of `kernels` fails with `status` and a message containing `text`. */
static void expect_refused(kiln_backend* backend, const kiln_program* program, kiln_status status,
                           const char* text, int line) {
  kiln_code* const sentinel = (kiln_code*)&kernels; /* not NULL: a failure must set it to NULL */
  kiln_code* code = sentinel;
  const kiln_status got = kiln_compile_kernels(backend, program, &kernels, 0, &code);
  if (got != status || strstr(kiln_last_error(), text) == NULL || code != NULL) {
    fprintf(stderr, "own_kernels.c:%d: expected %s containing \"%s\", got %s: %s\n", line,
            kiln_status_name(status), text, kiln_status_name(got), kiln_last_error());
    ++failures;
  }
  if (code != sentinel) kiln_code_free(code);
}
#define REFUSED(status, text) expect_refused(backend, program, status, text, __LINE__)

/* The errors of describing kernels, each found before anything is built. */
static void description_errors(kiln_backend* backend, const kiln_program* program) {
  kiln_code* code = NULL;
  const int64_t square[2] = {4, 4};

  CHECK(kiln_compile_kernels(NULL, program, &kernels, 0, &code) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("backend is NULL");
  CHECK(kiln_compile_kernels(backend, NULL, &kernels, 0, &code) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("program is NULL");
  CHECK(kiln_compile_kernels(backend, program, NULL, 0, &code) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("kernels is NULL");
  CHECK(kiln_compile_kernels(backend, program, &kernels, 0, NULL) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("out is NULL");

  {
    const char* format = kernels.format;
    kernels.format = NULL;
    REFUSED(KILN_INVALID_ARGUMENT, "format is NULL");
    kernels.format = format;
  }
  kernels.exports = NULL;
  REFUSED(KILN_INVALID_ARGUMENT, "exports is NULL but its count is 2");
  kernels.exports = exports;
  exports[1].name = NULL;
  REFUSED(KILN_INVALID_ARGUMENT, "the name of export 1 is NULL");
  exports[1].name = "add_merge";
  dispatches[1].bindings = NULL;
  REFUSED(KILN_INVALID_ARGUMENT, "routine 1 ('merge_b'), dispatch 0 (kernel 'add_merge'): bindings is NULL");
  dispatches[1].bindings = merge_bindings;
  reverse_bindings[1].node = NULL;
  REFUSED(KILN_INVALID_ARGUMENT, "dispatch 0 (kernel 'reverse_scale'), binding 1: node is NULL");
  reverse_bindings[1].node = "b";
  reverse_bindings[0].dtype = 13; /* one past KILN_BF16 */
  REFUSED(KILN_INVALID_ARGUMENT, "node 'a'): dtype 13 is not a kiln_dtype");
  reverse_bindings[0].dtype = KILN_F32;
  reverse_bindings[0].access = 7;
  REFUSED(KILN_INVALID_ARGUMENT, "access 7 is not a kiln_access");
  reverse_bindings[0].access = KILN_READ;

  /* The runtime's own checks (check_kernel_set), with its messages. */
  reverse_bindings[1].node = "nowhere";
  REFUSED(KILN_NOT_FOUND, "binds node 'nowhere', which the program does not declare");
  reverse_bindings[1].node = "b";
  reverse_bindings[0].dims = square;
  reverse_bindings[0].rank = 2;
  REFUSED(KILN_INVALID_ARGUMENT, "binds node 'a' as f32[4, 4], but the program declares it f32[16]");
  reverse_bindings[0].dims = kDims;
  reverse_bindings[0].rank = 1;
  dispatches[0].kernel = "no_such_kernel";
  REFUSED(KILN_NOT_FOUND, "'framework_kernels' does not export a kernel named 'no_such_kernel'");
  dispatches[0].kernel = "reverse_scale";
  dispatches[0].constant_count = 0;
  REFUSED(KILN_INVALID_ARGUMENT, "passes 0 push constants, but the export takes 1");
  dispatches[0].constant_count = 1;
  dispatches[0].workgroups[1] = 0;
  REFUSED(KILN_INVALID_ARGUMENT, "workgroup count of 0");
  dispatches[0].workgroups[1] = 1;
  routines[1].name = "reverse";
  REFUSED(KILN_INVALID_ARGUMENT, "two routines named 'reverse'");
  routines[1].name = "merge_b";
  merge_bindings[1].access = KILN_READ_WRITE;
  REFUSED(KILN_INVALID_ARGUMENT, "merge buffer of 'b' for writing; a merge buffer is read only");
  merge_bindings[1].access = KILN_READ;
}

/* y = reverse(2x) * 3 + x on one stream: before, the kernel, after. Then a second stream's b
 * (from its own x) goes into the first stream's merge buffer, and merge_b adds it to b. */
static int run_kernels(kiln_backend* backend, const kiln_program* program, kiln_code* generated,
                       kiln_code* own) {
  kiln_tensors* tensors[2] = {NULL, NULL};
  kiln_stream* streams[2] = {NULL, NULL};
  kiln_context* roots[2] = {NULL, NULL};
  kiln_context* kiln_routines[2] = {NULL, NULL};
  kiln_context* own_routines[2] = {NULL, NULL};
  kiln_routine *before[2] = {NULL, NULL}, *reverse[2] = {NULL, NULL};
  kiln_routine *after = NULL, *merge_b = NULL;
  float x[2][N], y[N], b[N];
  int s, i, ok = 1;

  for (s = 0; s < 2; ++s) {
    for (i = 0; i < N; ++i) x[s][i] = (float)(s == 0 ? i + 1 : 10 * i - 7);
    ok = ok && kiln_tensors_create(program, 0, &tensors[s]) == KILN_OK &&
         kiln_stream_create(backend, &streams[s]) == KILN_OK &&
         kiln_context_create(backend, streams[s], tensors[s], &roots[s]) == KILN_OK &&
         kiln_link(roots[s], generated, &kiln_routines[s]) == KILN_OK &&
         kiln_link(kiln_routines[s], own, &own_routines[s]) == KILN_OK &&
         kiln_routine_find(kiln_routines[s], "before", &before[s]) == KILN_OK &&
         kiln_routine_find(own_routines[s], "reverse", &reverse[s]) == KILN_OK &&
         kiln_tensor_write(tensors[s], "x", KILN_F32, kDims, 1, x[s], sizeof x[s]) == KILN_OK;
  }
  CHECK(ok);
  if (ok) {
    ok = kiln_routine_find(kiln_routines[0], "after", &after) == KILN_OK &&
         kiln_routine_find(own_routines[0], "merge_b", &merge_b) == KILN_OK;
    CHECK(ok);
  }
  if (ok) {
    /* Ordered by the semaphores of a, b: before writes a, the kernel reads it and writes b,
     * after reads b. */
    OK(kiln_routine_run(before[0]));
    OK(kiln_routine_run(reverse[0]));
    OK(kiln_routine_run(after));
    OK(kiln_tensor_read(tensors[0], "y", KILN_F32, kDims, 1, y, sizeof y));
    for (i = 0; i < N; ++i) CHECK(y[i] == x[0][N - 1 - i] * 2 * 3 + x[0][i]);

    /* Nothing in stream 0's merge buffer yet. */
    CHECK(kiln_routine_run(merge_b) == KILN_FAILED_PRECONDITION);
    ERROR_SAYS("it reads b.merge, but the merge buffer of stream");
    OK(kiln_routine_run(before[1]));
    OK(kiln_routine_run(reverse[1]));
    OK(kiln_device_to_device("b", KILN_MERGE_COPY, own_routines[0], own_routines[1]));
    OK(kiln_routine_run(merge_b));
    OK(kiln_tensor_read(tensors[0], "b", KILN_F32, kDims, 1, b, sizeof b));
    for (i = 0; i < N; ++i) CHECK(b[i] == x[0][N - 1 - i] * 2 * 3 + x[1][N - 1 - i] * 2 * 3);
    OK(kiln_backend_await(backend));
  }
  kiln_routine_free(after);
  kiln_routine_free(merge_b);
  for (s = 0; s < 2; ++s) {
    kiln_routine_free(before[s]);
    kiln_routine_free(reverse[s]);
    kiln_context_free(own_routines[s]);
    kiln_context_free(kiln_routines[s]);
    kiln_context_free(roots[s]);
    kiln_stream_free(streams[s]);
    kiln_tensors_free(tensors[s]);
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  const int builds = strcmp(device, "interp") != 0;
  const char* const names[2] = {"before", "after"};
  kiln_program* program = NULL;
  kiln_backend* backend = NULL;
  kiln_code* generated = NULL;
  kiln_code* own = NULL;

  if (!device_present(device)) {
    printf("device %s is not available here: skipped\n", device);
    return 77;
  }
  kernels.format = strcmp(device, "opencl") == 0 ? "opencl-c" : "c";
  kernels.source = strcmp(device, "opencl") == 0 ? kOpenCLKernels : kCKernels;
  REQUIRE(kiln_program_parse(kProgram, "own_kernels.kiln", &program) == KILN_OK);
  REQUIRE(kiln_backend_create(device, &backend) == KILN_OK);
  REQUIRE(kiln_compile(backend, program, names, 2, 0, &generated) == KILN_OK);

  description_errors(backend, program);
  if (!builds) {
    /* The interpreter builds neither format: the device says so, naming the set. */
    REFUSED(KILN_UNIMPLEMENTED, "compiling the kernels of 'framework_kernels' for device 'interp");
  } else {
    const char* source = kernels.source;
    kernels.source = strcmp(device, "opencl") == 0 ? "__kernel void broken(" : "int this is not C;";
    REFUSED(KILN_INVALID_ARGUMENT, "compiling the kernels of 'framework_kernels'");
    kernels.source = source;
    CHECK(kiln_compile_kernels(backend, program, &kernels, 0, &own) == KILN_OK);
    if (own) CHECK(run_kernels(backend, program, generated, own) == 0);
  }

  kiln_code_free(own);
  kiln_code_free(generated);
  kiln_backend_free(backend);
  kiln_program_free(program);
  if (failures) fprintf(stderr, "%d check(s) failed on %s\n", failures, device);
  return failures ? 1 : 0;
}
