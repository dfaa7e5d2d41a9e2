/* Programs with sizes (language version 2) through the C API, from plain C99: one compile and
 * one link, then runs at the sizes the written shapes bind (kiln_tensor_write with any shape that
 * fits, kiln_tensor_shape of the bound shape, kiln_size_set / kiln_size_get), and the errors of
 * shapes that disagree. Run as `kiln_capi_sizes_test DEVICE`; exits 77 (skipped) where the device
 * is not there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "kiln/kiln.h"

static const char* kProgram =
    "size N\n"
    "input  x : f32[N, 2]\n"
    "output y : f32[N]\n"
    "output count : f32\n"
    "y[i] = x[i, 0] * x[i, 1] + f32(N)\n"
    "count = sum(x[i, j] * 0 + 1)\n";

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* stream = NULL;
  kiln_code* code = NULL;
  kiln_context* root = NULL;
  kiln_context* linked = NULL;
  kiln_routine* routine = NULL;
  int64_t value = 0;
  static const int64_t sizes[] = {5, 1, 0, 300, 2};
  size_t s;

  if (!device_present(device)) {
    printf("device %s is not available here: skipped\n", device);
    return 77;
  }
  REQUIRE(kiln_program_parse(kProgram, "sizes.kiln", &program) == KILN_OK);
  REQUIRE(kiln_tensors_create(program, 0, &tensors) == KILN_OK);
  REQUIRE(kiln_size_get(tensors, "N", &value) == KILN_OK);
  CHECK(value == -1);
  CHECK(kiln_size_get(tensors, "M", &value) == KILN_NOT_FOUND);
  REQUIRE(kiln_backend_create(device, &backend) == KILN_OK);
  REQUIRE(kiln_stream_create(backend, &stream) == KILN_OK);
  REQUIRE(kiln_compile(backend, program, NULL, 0, 0, &code) == KILN_OK);
  REQUIRE(kiln_context_create(backend, stream, tensors, &root) == KILN_OK);
  REQUIRE(kiln_link(root, code, &linked) == KILN_OK);
  REQUIRE(kiln_routine_find(linked, "main", &routine) == KILN_OK);

  for (s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const int64_t n = sizes[s];
    int64_t dims[2];
    int64_t shape[2] = {0, 0};
    size_t rank = 0;
    kiln_dtype dtype = -1;
    float* x = (float*)calloc((size_t)(2 * n + 1), sizeof(float));
    float* y = (float*)calloc((size_t)(n + 1), sizeof(float));
    float total = -1;
    int64_t k;
    REQUIRE(x && y);
    for (k = 0; k < 2 * n; ++k) x[k] = (float)(k % 5) - 1.5f;
    dims[0] = n;
    dims[1] = 2;
    CHECK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 2, x, (size_t)(2 * n) * sizeof(float)) == KILN_OK);
    CHECK(kiln_size_get(tensors, "N", &value) == KILN_OK && value == n);
    CHECK(kiln_tensor_shape(tensors, "y", &dtype, shape, 2, &rank) == KILN_OK);
    CHECK(dtype == KILN_F32 && rank == 1 && shape[0] == n);
    /* A fixed dimension that differs: refused, naming the tensor. */
    dims[1] = 3;
    CHECK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 2, x, (size_t)(2 * n) * sizeof(float)) ==
          KILN_INVALID_ARGUMENT);
    CHECK(strstr(kiln_last_error(), "dimension 1 of tensor 'x' is 2") != NULL);
    REQUIRE(kiln_routine_run(routine) == KILN_OK);
    REQUIRE(kiln_stream_await(stream) == KILN_OK);
    CHECK(kiln_tensor_read(tensors, "y", KILN_F32, &n, 1, y, (size_t)n * sizeof(float)) == KILN_OK);
    for (k = 0; k < n; ++k) CHECK(y[k] == x[2 * k] * x[2 * k + 1] + (float)n);
    CHECK(kiln_tensor_read(tensors, "count", KILN_F32, NULL, 0, &total, sizeof total) == KILN_OK);
    CHECK(total == (float)(2 * n));
    free(x);
    free(y);
  }
  /* kiln_size_set, then a write whose shape contradicts it before a run: refused. */
  CHECK(kiln_size_set(tensors, "N", 4) == KILN_OK);
  {
    float x[6] = {0};
    int64_t dims[2] = {3, 2};
    CHECK(kiln_tensor_write(tensors, "x", KILN_F32, dims, 2, x, sizeof x) == KILN_INVALID_ARGUMENT);
    CHECK(strstr(kiln_last_error(), "size N, which is 4") != NULL);
  }
  CHECK(kiln_size_set(tensors, "M", 4) == KILN_NOT_FOUND);
  CHECK(kiln_size_set(tensors, "N", -2) == KILN_INVALID_ARGUMENT);

  kiln_routine_free(routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_code_free(code);
  kiln_stream_free(stream);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("sizes through the C API on %s: ok\n", device);
  return 0;
}
