/* The C API from several threads at once (docs/capi.md, "Threads"), from plain C99 with POSIX
 * threads; run under ThreadSanitizer by `make test`.
 *
 * 1. Threads that share one backend and one compiled code, each with tensors, a stream, a context
 *    and a routine of its own, run at sizes and with values of their own: each gets its own
 *    results.
 * 2. Threads that share every handle (one tensors, stream, routine) run it and read its output
 *    at once: every call is safe, and every read sees the one input the main thread wrote.
 * No thread waits on time: they start together behind a barrier and are joined.
 * Run as `kiln_capi_threads_test DEVICE`; exits 77 (skipped) where the device is not there. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "kiln/kiln.h"

static const char* kProgram =
    "size N\n"
    "input  x : f32[N, 2]\n"
    "input  scale : f32\n"
    "output y : f32[N]\n"
    "y[i] = x[i, 0] * x[i, 1] * scale + f32(N)\n";

enum { kThreads = 4, kRounds = 40 };

static kiln_backend* backend = NULL;
static kiln_code* code = NULL;
static pthread_barrier_t start;
static pthread_mutex_t failures_mutex = PTHREAD_MUTEX_INITIALIZER;

static void count_failure(void) {
  pthread_mutex_lock(&failures_mutex);
  ++failures;
  pthread_mutex_unlock(&failures_mutex);
}

#define T_CHECK(cond)                                                                       \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: thread %d: CHECK(%s) failed; last error: %s\n", __FILE__,     \
              __LINE__, worker, #cond, kiln_last_error());                                  \
      count_failure();                                                                      \
      goto done;                                                                            \
    }                                                                                       \
  } while (0)

/* Part 1: a thread with handles of its own over the shared backend and code. */
static void* own_handles(void* arg) {
  const int worker = (int)(size_t)arg;
  kiln_tensors* tensors = NULL;
  kiln_stream* stream = NULL;
  kiln_context* root = NULL;
  kiln_context* linked = NULL;
  kiln_routine* routine = NULL;
  float x[2 * 16], y[16];
  int round;
  pthread_barrier_wait(&start);
  T_CHECK(kiln_tensors_create(NULL, 0, &tensors) == KILN_INVALID_ARGUMENT); /* errors are per thread */
  T_CHECK(strstr(kiln_last_error(), "program") != NULL);
  {
    kiln_program* program = NULL;
    T_CHECK(kiln_program_parse(kProgram, "threads.kiln", &program) == KILN_OK);
    T_CHECK(kiln_tensors_create(program, 0, &tensors) == KILN_OK);
    kiln_program_free(program);
  }
  T_CHECK(kiln_stream_create(backend, &stream) == KILN_OK);
  T_CHECK(kiln_context_create(backend, stream, tensors, &root) == KILN_OK);
  T_CHECK(kiln_link(root, code, &linked) == KILN_OK);
  T_CHECK(kiln_routine_find(linked, "main", &routine) == KILN_OK);
  for (round = 0; round < kRounds; ++round) {
    const int64_t n = 1 + (worker * 5 + round) % 16;
    const int64_t dims[2] = {n, 2};
    const float scale = (float)(worker + 1);
    int64_t k;
    for (k = 0; k < 2 * n; ++k) x[k] = (float)((k + round) % 7) - (float)worker;
    T_CHECK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 2, x, (size_t)(2 * n) * sizeof(float)) == KILN_OK);
    T_CHECK(kiln_tensor_write(tensors, "scale", KILN_F32, NULL, 0, &scale, sizeof scale) == KILN_OK);
    T_CHECK(kiln_routine_run(routine) == KILN_OK);
    T_CHECK(kiln_tensor_read(tensors, "y", KILN_F32, &n, 1, y, (size_t)n * sizeof(float)) == KILN_OK);
    for (k = 0; k < n; ++k) T_CHECK(y[k] == x[2 * k] * x[2 * k + 1] * scale + (float)n);
  }
done:
  kiln_routine_free(routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_stream_free(stream);
  kiln_tensors_free(tensors);
  return NULL;
}

/* Part 2: every thread on the same handles. */
static kiln_tensors* shared_tensors = NULL;
static kiln_stream* shared_stream = NULL;
static kiln_routine* shared_routine = NULL;

static void* shared_handles(void* arg) {
  const int worker = (int)(size_t)arg;
  const int64_t n = 8;
  float y[8];
  int round;
  int64_t k;
  pthread_barrier_wait(&start);
  for (round = 0; round < kRounds; ++round) {
    T_CHECK(kiln_routine_run(shared_routine) == KILN_OK);
    if (round % 2) T_CHECK(kiln_stream_await(shared_stream) == KILN_OK);
    T_CHECK(kiln_tensor_read(shared_tensors, "y", KILN_F32, &n, 1, y, sizeof y) == KILN_OK);
    for (k = 0; k < n; ++k) T_CHECK(y[k] == (float)(k * k) * 2.0f + 8.0f);
  }
done:
  return NULL;
}

static int run_threads(void* (*body)(void*)) {
  pthread_t threads[kThreads];
  size_t t;
  REQUIRE(pthread_barrier_init(&start, NULL, kThreads) == 0);
  for (t = 0; t < kThreads; ++t) REQUIRE(pthread_create(&threads[t], NULL, body, (void*)t) == 0);
  for (t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  pthread_barrier_destroy(&start);
  return 0;
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  kiln_program* program = NULL;
  kiln_context* root = NULL;
  kiln_context* linked = NULL;
  float x[16];
  const float scale = 2.0f;
  const int64_t dims[2] = {8, 2};
  int k;

  if (!device_present(device)) {
    printf("device %s is not available here: skipped\n", device);
    return 77;
  }
  REQUIRE(kiln_program_parse(kProgram, "threads.kiln", &program) == KILN_OK);
  REQUIRE(kiln_backend_create(device, &backend) == KILN_OK);
  REQUIRE(kiln_compile(backend, program, NULL, 0, 0, &code) == KILN_OK);
  REQUIRE(run_threads(own_handles) == 0);

  REQUIRE(kiln_tensors_create(program, 0, &shared_tensors) == KILN_OK);
  REQUIRE(kiln_stream_create(backend, &shared_stream) == KILN_OK);
  REQUIRE(kiln_context_create(backend, shared_stream, shared_tensors, &root) == KILN_OK);
  REQUIRE(kiln_link(root, code, &linked) == KILN_OK);
  REQUIRE(kiln_routine_find(linked, "main", &shared_routine) == KILN_OK);
  for (k = 0; k < 8; ++k) x[2 * k] = x[2 * k + 1] = (float)k;
  REQUIRE(kiln_tensor_write(shared_tensors, "x", KILN_F32, dims, 2, x, sizeof x) == KILN_OK);
  REQUIRE(kiln_tensor_write(shared_tensors, "scale", KILN_F32, NULL, 0, &scale, sizeof scale) == KILN_OK);
  REQUIRE(run_threads(shared_handles) == 0);
  OK(kiln_backend_await(backend));

  kiln_routine_free(shared_routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_stream_free(shared_stream);
  kiln_tensors_free(shared_tensors);
  kiln_code_free(code);
  kiln_backend_free(backend);
  kiln_program_free(program);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
