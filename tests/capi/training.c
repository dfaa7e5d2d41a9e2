/* The C API (include/kiln/kiln.h) from plain C99, compiled as C with -pedantic -Werror and linked
 * to the shared libkiln: a whole training loop (linear regression by gradient descent on two
 * streams, the gradients of the second shard merged into the first, the weights copied back),
 * then a custom call written in C, a value trace, a const the host may not set and an input it did
 * not set, then the errors a caller can make, each with its message. Exits 0 when everything holds;
 * otherwise prints what failed and exits 1. Run under ASan by `make test`, where a leak fails it.
 * Usage: kiln_capi_test [DEVICE] (default cpu); exits 77 (skipped) when DEVICE is not usable. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, close */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "kiln/kiln.h"
#include "kiln/ral/abi.h"

enum { kShard = 64, kFeatures = 3, kSteps = 300 };

static const char* const kProgram =
    "input  x : f32[64, 3]\n"
    "input  y : f32[64]\n"
    "param  w : f32[3]\n"
    "param  g : f32[3]\n"
    "param  loss : f32\n"
    "tensor err : f32[64]\n"
    "const  lr : f32 = 0.004\n"
    "\n"
    "routine grad {\n"
    "  err[n] = sum(x[n, k] * w[k])\n"
    "  err[n] -= y[n]\n"
    "  loss = sum(err[n] * err[n])\n"
    "  g[k] = sum(err[n] * x[n, k])\n"
    "}\n"
    "routine merge_g {\n"
    "  g[k] += g.merge[k]\n"
    "}\n"
    "routine update {\n"
    "  w[k] -= lr * g[k]\n"
    "}\n";

static const float kTrueWeights[kFeatures] = {1.5f, -2.0f, 0.5f};

/* Deterministic data in [-1, 1) and its targets. */
static void make_shard(int shard, int step, float* x, float* y) {
  unsigned state = 2654435761u * (unsigned)(shard * 7919 + step + 1);
  int n, k;
  for (n = 0; n < kShard; ++n) {
    y[n] = 0;
    for (k = 0; k < kFeatures; ++k) {
      state = state * 1664525u + 1013904223u;
      x[n * kFeatures + k] = (float)((state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
      y[n] += kTrueWeights[k] * x[n * kFeatures + k];
    }
  }
}

static void train(const char* device) {
  static const int64_t x_dims[2] = {kShard, kFeatures};
  static const int64_t y_dims[1] = {kShard};
  static const int64_t w_dims[1] = {kFeatures};
  const char* routines[3] = {"grad", "merge_g", "update"};
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* streams[2] = {NULL, NULL};
  kiln_code* code = NULL;
  kiln_context* roots[2] = {NULL, NULL};
  kiln_context* shards[2] = {NULL, NULL};
  kiln_routine* grad[2] = {NULL, NULL};
  kiln_routine* merge = NULL;
  kiln_routine* update = NULL;
  float x[kShard * kFeatures], y[kShard], w[kFeatures], loss = 0, first_loss = -1;
  size_t count = 0;
  int s, step, k;

  OK(kiln_program_parse(kProgram, "regression.kiln", &program));
  OK(kiln_program_routines(program, NULL, 0, &count));
  CHECK(count == 3);
  OK(kiln_tensors_create(program, 1, &tensors));
  OK(kiln_backend_create(device, &backend));
  OK(kiln_compile(backend, program, routines, 3, 0, &code));
  for (s = 0; s < 2; ++s) {
    OK(kiln_stream_create(backend, &streams[s]));
    OK(kiln_context_create(backend, streams[s], tensors, &roots[s]));
    OK(kiln_link(roots[s], code, &shards[s]));
    OK(kiln_routine_find(shards[s], "grad", &grad[s]));
  }
  OK(kiln_routine_find(shards[0], "merge_g", &merge));
  OK(kiln_routine_find(shards[0], "update", &update));
  if (failures) goto done;

  for (step = 0; step < kSteps; ++step) {
    for (s = 0; s < 2; ++s) {
      make_shard(s, step, x, y);
      /* Uploaded when grad is scheduled: the host copies may be rewritten right after. */
      OK(kiln_tensor_write(tensors, "x", KILN_F32, x_dims, 2, x, sizeof x));
      OK(kiln_tensor_write(tensors, "y", KILN_F32, y_dims, 1, y, sizeof y));
      OK(kiln_routine_run(grad[s]));
    }
    OK(kiln_device_to_device("g", KILN_MERGE_STREAMING, shards[0], shards[1]));
    OK(kiln_routine_run(merge));
    OK(kiln_routine_run(update));
    OK(kiln_device_to_device("w", KILN_MERGE_NO, shards[1], shards[0]));
    if (step == 0) {
      OK(kiln_tensor_read(tensors, "loss", KILN_F32, NULL, 0, &first_loss, sizeof first_loss));
    }
    if (failures) goto done;
  }
  OK(kiln_backend_await(backend));
  OK(kiln_tensor_read(tensors, "w", KILN_F32, w_dims, 1, w, sizeof w));
  OK(kiln_tensor_read(tensors, "loss", KILN_F32, NULL, 0, &loss, sizeof loss));
  for (k = 0; k < kFeatures; ++k) {
    if (fabsf(w[k] - kTrueWeights[k]) > 1e-3f) {
      fprintf(stderr, "w[%d] = %g, expected %g\n", k, w[k], kTrueWeights[k]);
      ++failures;
    }
  }
  CHECK(first_loss > 1.0f);
  CHECK(loss < 1e-4f * first_loss);
  printf("%s: w = (%.4f, %.4f, %.4f), loss %.3g -> %.3g after %d steps on 2 streams\n", device,
         w[0], w[1], w[2], first_loss, loss, kSteps);

done:
  kiln_routine_free(update);
  kiln_routine_free(merge);
  for (s = 0; s < 2; ++s) {
    kiln_routine_free(grad[s]);
    kiln_context_free(shards[s]);
    kiln_context_free(roots[s]);
    kiln_stream_free(streams[s]);
  }
  kiln_code_free(code);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
}

/* y = x * scale + shift, called by the program below; fails when scale is negative. */
typedef kiln_ral_memref(1) MemRef1;

static kiln_status c_affine(kiln_call* call, void** args, void* user) {
  const MemRef1* x = (const MemRef1*)args[1];
  const MemRef1* y = (const MemRef1*)args[2];
  const double scale = *(const double*)args[3], shift = *(const double*)args[4];
  const float* in = (const float*)x->data;
  float* out = (float*)y->data;
  int64_t i;
  ++*(int*)user;
  if (scale < 0) {
    kiln_call_set_error(call, "c_affine: scale must not be negative");
    return KILN_INVALID_ARGUMENT;
  }
  for (i = 0; i < x->sizes[0]; ++i) out[i] = (float)(in[i] * scale + shift);
  return KILN_OK;
}

static void custom_call(const char* device) {
  static const int64_t dims[1] = {5};
  static int calls = 0;
  const float x[5] = {1, 2, 3, 4, 5};
  float y[5] = {0, 0, 0, 0, 0};
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* stream = NULL;
  kiln_code* code = NULL;
  kiln_context *root = NULL, *linked = NULL;
  kiln_routine *good = NULL, *bad = NULL;
  int i;

  OK(kiln_register_call("c_affine", device, "m1df32_m1df32_f64_f64", c_affine, &calls));
  CHECK(kiln_register_call("c_affine", device, "m1df32_m1df32_f64_f64", c_affine, &calls) ==
        KILN_ALREADY_EXISTS);
  CHECK(kiln_register_call("c_affine", device, NULL, c_affine, NULL) == KILN_INVALID_ARGUMENT);
  /* Names no program can call are refused, not registered where nothing can reach them. */
  CHECK(kiln_register_call("bad name!", device, "", c_affine, NULL) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("not a name a program can call");
  CHECK(kiln_register_call("9abc", device, "", c_affine, NULL) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_register_call("x-y", device, "", c_affine, NULL) == KILN_INVALID_ARGUMENT);
  OK(kiln_program_parse("input x : f32[5]\noutput y : f32[5]\n"
                        "routine good {\n  call c_affine(x, scale=2, shift=0.5) -> y\n}\n"
                        "routine bad {\n  call c_affine(x, scale=-1, shift=0) -> y\n}\n",
                        "custom.kiln", &program));
  OK(kiln_tensors_create(program, 0, &tensors));
  OK(kiln_backend_create(device, &backend));
  OK(kiln_stream_create(backend, &stream));
  OK(kiln_compile(backend, program, NULL, 0, 0, &code));
  OK(kiln_context_create(backend, stream, tensors, &root));
  OK(kiln_link(root, code, &linked));
  OK(kiln_routine_find(linked, "good", &good));
  OK(kiln_routine_find(linked, "bad", &bad));
  if (!failures) {
    OK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 1, x, sizeof x));
    OK(kiln_routine_run(good));
    OK(kiln_tensor_read(tensors, "y", KILN_F32, dims, 1, y, sizeof y));
    for (i = 0; i < 5; ++i) CHECK(y[i] == x[i] * 2 + 0.5f);
    CHECK(calls == 1);
    /* The function's failure fails the routine, with its message. */
    OK(kiln_routine_run(bad));
    CHECK(kiln_stream_await(stream) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("c_affine: scale must not be negative");
  }
  kiln_routine_free(bad);
  kiln_routine_free(good);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_code_free(code);
  kiln_stream_free(stream);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
}

/* A const cannot be set from the host (its value is compiled into the code), and a routine
 * does not run on an input nobody set: both are errors that name the tensor. */
static void consts_and_unset_inputs(const char* device) {
  static const int64_t dims[1] = {4};
  const float x[4] = {1, 2, 3, 4};
  const float lr = 0.5f;
  float y[4] = {0, 0, 0, 0};
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* stream = NULL;
  kiln_code* code = NULL;
  kiln_context *root = NULL, *linked = NULL;
  kiln_routine* main_routine = NULL;
  int i;

  OK(kiln_program_parse("const lr : f32 = 0.25\ninput x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * lr\n",
                        "scale.kiln", &program));
  OK(kiln_tensors_create(program, 0, &tensors));
  CHECK(kiln_tensor_write(tensors, "lr", KILN_F32, NULL, 0, &lr, sizeof lr) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("tensor 'lr' is a const");
  OK(kiln_backend_create(device, &backend));
  OK(kiln_stream_create(backend, &stream));
  OK(kiln_compile(backend, program, NULL, 0, 0, &code));
  OK(kiln_context_create(backend, stream, tensors, &root));
  OK(kiln_link(root, code, &linked));
  OK(kiln_routine_find(linked, "main", &main_routine));
  if (!failures) {
    CHECK(kiln_routine_run(main_routine) == KILN_FAILED_PRECONDITION);
    ERROR_SAYS("input 'x' was never given a value, and routine 'main' reads it");
    OK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 1, x, sizeof x));
    OK(kiln_routine_run(main_routine));
    OK(kiln_tensor_read(tensors, "y", KILN_F32, dims, 1, y, sizeof y));
    for (i = 0; i < 4; ++i) CHECK(y[i] == x[i] * 0.25f);
  }
  kiln_routine_free(main_routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_code_free(code);
  kiln_stream_free(stream);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
}

static void bad_input(void) {
  static const int64_t good[2] = {64, 3};
  static const int64_t short_dims[2] = {64, 2};
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_dtype dtype = KILN_I64;
  int64_t dims[4] = {0, 0, 0, 0};
  size_t rank = 0;
  float x[64 * 3];
  double xd[64 * 3];
  memset(x, 0, sizeof x);
  memset(xd, 0, sizeof xd);

  /* A program with two errors: both diagnostics, as FILE:LINE:COL. */
  CHECK(kiln_program_parse("input a : f32[4]\nb[i] = a[i]\nc[i] = q[i]\n", "bad.kiln", &program) ==
        KILN_INVALID_ARGUMENT);
  CHECK(program == NULL);
  ERROR_SAYS("bad.kiln:2:");
  ERROR_SAYS("bad.kiln:3:");
  CHECK(kiln_program_load("/nonexistent/kiln/program.kiln", &program) != KILN_OK);
  ERROR_SAYS("/nonexistent/kiln/program.kiln");
  CHECK(kiln_program_parse(NULL, NULL, &program) == KILN_INVALID_ARGUMENT);

  /* Sizes (language version 2): a table starts with them unbound (tests/capi/sizes.c runs them). */
  OK(kiln_program_parse("size N\ninput a : f32[N]\noutput b : f32[N]\nb[i] = a[i]\n", "sized.kiln", &program));
  OK(kiln_tensors_create(program, 0, &tensors));
  {
    int64_t n = 0;
    OK(kiln_size_get(tensors, "N", &n));
    CHECK(n == -1);
  }
  kiln_tensors_free(tensors);
  tensors = NULL;
  kiln_program_free(program);
  program = NULL;

  OK(kiln_program_parse(kProgram, "regression.kiln", &program));
  OK(kiln_tensors_create(program, 0, &tensors));
  OK(kiln_tensor_shape(tensors, "x", &dtype, dims, 4, &rank));
  CHECK(dtype == KILN_F32 && rank == 2 && dims[0] == 64 && dims[1] == 3);
  OK(kiln_tensor_shape(tensors, "loss", &dtype, NULL, 0, &rank));
  CHECK(rank == 0);

  CHECK(kiln_tensor_write(tensors, "x", KILN_F64, good, 2, xd, sizeof xd) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("tensor 'x': expects f32[64, 3], got f64[64, 3]");
  CHECK(kiln_tensor_write(tensors, "x", KILN_F32, short_dims, 2, x, sizeof x) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("expects f32[64, 3], got f32[64, 2]");
  CHECK(kiln_tensor_write(tensors, "x", KILN_F32, good, 2, x, 100) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("768 bytes, got 100");
  CHECK(kiln_tensor_write(tensors, "x", KILN_F32, good, 2, NULL, sizeof x) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("data is NULL");
  CHECK(kiln_tensor_write(tensors, "x", (kiln_dtype)13, good, 2, x, sizeof x) == KILN_INVALID_ARGUMENT);
  ERROR_SAYS("not a kiln_dtype");
  CHECK(kiln_tensor_read(tensors, "nope", KILN_F32, good, 2, x, sizeof x) != KILN_OK);
  ERROR_SAYS("nope");
  CHECK(kiln_tensor_write(NULL, "x", KILN_F32, good, 2, x, sizeof x) == KILN_INVALID_ARGUMENT);

  CHECK(kiln_backend_create("no_such_device", &backend) != KILN_OK);
  CHECK(backend == NULL);
  ERROR_SAYS("no_such_device");
  CHECK(kiln_routine_run(NULL) == KILN_INVALID_ARGUMENT);
  CHECK(kiln_device_to_device("g", (kiln_merge)7, NULL, NULL) == KILN_INVALID_ARGUMENT);
  CHECK(strcmp(kiln_status_name(KILN_NOT_FOUND), "NOT_FOUND") == 0);
  CHECK(strcmp(kiln_status_name((kiln_status)99), "UNKNOWN") == 0);

  kiln_tensors_free(tensors);
  kiln_program_free(program);
  /* Freeing NULL does nothing. */
  kiln_program_free(NULL);
  kiln_backend_free(NULL);
}

/* Value tracing: a traced backend's run of y = log(x) with x[1] = 0 is written as JSON lines
 * whose entry names the statement and holds -inf; a second trace cannot start meanwhile. */
static void value_trace(const char* device) {
  static const int64_t dims[1] = {3};
  const float x[3] = {1, 0, 2};
  const char* tmp = getenv("TMPDIR");
  char path[512];
  char text[4096];
  size_t length = 0;
  FILE* file = NULL;
  int fd = -1;
  kiln_value_trace *trace = NULL, *second = NULL;
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* stream = NULL;
  kiln_code* code = NULL;
  kiln_context *root = NULL, *linked = NULL;
  kiln_routine* routine = NULL;

  snprintf(path, sizeof path, "%s/kiln-capi-trace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  OK(kiln_value_trace_start(&trace));
  CHECK(kiln_value_trace_start(&second) == KILN_FAILED_PRECONDITION);
  CHECK(kiln_backend_create_traced(device, NULL, &backend) == KILN_INVALID_ARGUMENT);
  OK(kiln_program_parse("input x : f32[3]\noutput y : f32[3]\nroutine main {\n  y[i] = log(x[i])\n}\n",
                        "log.kiln", &program));
  OK(kiln_tensors_create(program, 0, &tensors));
  OK(kiln_backend_create_traced(device, trace, &backend));
  OK(kiln_stream_create(backend, &stream));
  OK(kiln_compile(backend, program, NULL, 0, 0, &code));
  OK(kiln_context_create(backend, stream, tensors, &root));
  OK(kiln_link(root, code, &linked));
  OK(kiln_routine_find(linked, "main", &routine));
  if (!failures) {
    OK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 1, x, sizeof x));
    OK(kiln_routine_run(routine));
    OK(kiln_backend_await(backend));
    OK(kiln_value_trace_write(trace, path));
    file = fopen(path, "r");
    CHECK(file != NULL);
    if (file) {
      length = fread(text, 1, sizeof text - 1, file);
      text[length] = '\0';
      fclose(file);
      CHECK(strstr(text, "{\"kiln_value_trace\": 1") == text);
      CHECK(strstr(text, "\"text\": \"y[i] = log(x[i])\"") != NULL);
      CHECK(strstr(text, "\"value\": \"-inf\"") != NULL);
    }
  }
  remove(path);
  kiln_routine_free(routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_code_free(code);
  kiln_stream_free(stream);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
  kiln_value_trace_free(trace);
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  CHECK(strlen(kiln_version()) > 0);
  CHECK(device_present("cpu"));
  if (!device_present(device)) {
    printf("skipped: device %s is not usable here ('kiln devices' says why)\n", device);
    return 77;
  }
  train(device);
  custom_call(device);
  value_trace(device);
  consts_and_unset_inputs(device);
  bad_input();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("C API: all checks passed (kiln %s)\n", kiln_version());
  return 0;
}
