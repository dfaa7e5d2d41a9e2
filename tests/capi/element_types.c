/* Every element type through the C API, from plain C99: each type's dtype code, values written and
 * read back through a run (y = x for each type, bit for bit), a program with a u8 input and an f16
 * output, and the refusals (another type's code, a bool byte that is not 0 or 1). Run as
 * `kiln_capi_element_types_test DEVICE`; exits 77 (skipped) where the device is not there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "kiln/kiln.h"
#include "one_routine.h"

/* One type: its name in the language, its code, its element size, three values as bytes. */
struct type_case {
  const char* name;
  kiln_dtype dtype;
  size_t size;
  unsigned char values[24];
};

static void set_values(struct type_case* c, const void* values) { memcpy(c->values, values, 3 * c->size); }

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  struct type_case cases[13];
  const size_t count = sizeof cases / sizeof cases[0];
  char program[4096] = "";
  struct one_routine h;
  size_t t;
  int64_t three = 3;

  if (!device_present(device)) {
    printf("device %s is not available here: skipped\n", device);
    return 77;
  }
  {
    const unsigned char b[] = {0, 1, 1};
    const int8_t i8[] = {-128, 127, 5};
    const uint8_t u8[] = {255, 0, 7};
    const int16_t i16[] = {-32768, 32767, -2};
    const uint16_t u16[] = {65535, 0, 300};
    const int32_t i32[] = {-2147483647 - 1, 2147483647, 12};
    const uint32_t u32[] = {4294967295u, 0, 1};
    const int64_t i64[] = {-9223372036854775807LL - 1, 9223372036854775807LL, -3};
    const uint64_t u64[] = {18446744073709551615ULL, 9223372036854775808ULL, 9007199254740993ULL};
    const uint16_t f16[] = {0x3c00, 0xfc00, 0x7bff}; /* 1, -inf, 65504 */
    const uint16_t bf16[] = {0x3f80, 0x7fc0, 0xc040}; /* 1, nan, -3 */
    const float f32[] = {0.5f, -2.0f, 1e-3f};
    const double f64[] = {0.25, 1e300, -7.0};
    struct type_case all[13] = {{"bool", KILN_BOOL, 1, {0}}, {"i8", KILN_I8, 1, {0}},     {"u8", KILN_U8, 1, {0}},
                                {"i16", KILN_I16, 2, {0}},   {"u16", KILN_U16, 2, {0}},   {"i32", KILN_I32, 4, {0}},
                                {"u32", KILN_U32, 4, {0}},   {"i64", KILN_I64, 8, {0}},   {"u64", KILN_U64, 8, {0}},
                                {"f16", KILN_F16, 2, {0}},   {"bf16", KILN_BF16, 2, {0}}, {"f32", KILN_F32, 4, {0}},
                                {"f64", KILN_F64, 8, {0}}};
    memcpy(cases, all, sizeof cases);
    set_values(&cases[0], b);
    set_values(&cases[1], i8);
    set_values(&cases[2], u8);
    set_values(&cases[3], i16);
    set_values(&cases[4], u16);
    set_values(&cases[5], i32);
    set_values(&cases[6], u32);
    set_values(&cases[7], i64);
    set_values(&cases[8], u64);
    set_values(&cases[9], f16);
    set_values(&cases[10], bf16);
    set_values(&cases[11], f32);
    set_values(&cases[12], f64);
  }
  /* The codes keep their numbers: KILN_F32..KILN_I64 are 0..3, the new ones follow. */
  CHECK(KILN_F32 == 0 && KILN_F64 == 1 && KILN_I32 == 2 && KILN_I64 == 3 && KILN_BOOL == 4 && KILN_BF16 == 12);

  /* y_T = x_T for every type T, and the u8 -> f16 program: f = f16(u) / 2. */
  for (t = 0; t < count; ++t) {
    char line[128];
    sprintf(line, "input x_%s : %s[3]\noutput y_%s : %s[3]\n", cases[t].name, cases[t].name, cases[t].name,
            cases[t].name);
    strcat(program, line);
  }
  strcat(program, "input u : u8[4]\noutput f : f16[4]\n");
  for (t = 0; t < count; ++t) {
    char line[64];
    sprintf(line, "y_%s[i] = x_%s[i]\n", cases[t].name, cases[t].name);
    strcat(program, line);
  }
  strcat(program, "f[i] = f16(u[i]) / 2\n");
  if (one_routine_open(&h, device, program, "main") != KILN_OK) {
    fprintf(stderr, "opening the program failed: %s\n%s", kiln_last_error(), program);
    one_routine_free(&h);
    return 1;
  }

  for (t = 0; t < count; ++t) {
    char name[16];
    kiln_dtype dtype = -1;
    int64_t dims[1] = {0};
    size_t rank = 9;
    sprintf(name, "x_%s", cases[t].name);
    CHECK(kiln_tensor_shape(h.tensors, name, &dtype, dims, 1, &rank) == KILN_OK);
    CHECK(dtype == cases[t].dtype && rank == 1 && dims[0] == 3);
    OK(kiln_tensor_write(h.tensors, name, cases[t].dtype, &three, 1, cases[t].values, 3 * cases[t].size));
  }
  {
    const uint8_t u[4] = {0, 1, 255, 3};
    const int64_t four = 4;
    OK(kiln_tensor_write(h.tensors, "u", KILN_U8, &four, 1, u, sizeof u));
  }
  REQUIRE(kiln_routine_run(h.routine) == KILN_OK);
  REQUIRE(kiln_stream_await(h.stream) == KILN_OK);
  for (t = 0; t < count; ++t) {
    char name[16];
    unsigned char back[24];
    memset(back, 0xee, sizeof back);
    sprintf(name, "y_%s", cases[t].name);
    OK(kiln_tensor_read(h.tensors, name, cases[t].dtype, &three, 1, back, 3 * cases[t].size));
    if (memcmp(back, cases[t].values, 3 * cases[t].size) != 0) {
      fprintf(stderr, "%s: %s came back changed\n", device, name);
      ++failures;
    }
  }
  {
    /* 0/2 = 0, 1/2 = 0.5, 255/2 = 127.5, 3/2 = 1.5 as f16 bits. */
    const uint16_t want[4] = {0x0000, 0x3800, 0x57f8, 0x3e00};
    uint16_t f[4] = {1, 1, 1, 1};
    const int64_t four = 4;
    OK(kiln_tensor_read(h.tensors, "f", KILN_F16, &four, 1, f, sizeof f));
    CHECK(memcmp(f, want, sizeof f) == 0);
    /* Another type's code is refused, naming the tensor and both types; nothing converts. */
    CHECK(kiln_tensor_read(h.tensors, "f", KILN_U16, &four, 1, f, sizeof f) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("tensor 'f': expects f16[4], got u16[4]");
    CHECK(kiln_tensor_read(h.tensors, "y_bf16", KILN_F16, &three, 1, f, 6) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("expects bf16[3], got f16[3]");
    CHECK(kiln_tensor_write(h.tensors, "x_i8", KILN_U8, &three, 1, cases[2].values, 3) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("tensor 'x_i8': expects i8[3], got u8[3]");
    CHECK(kiln_tensor_write(h.tensors, "x_i8", 13, &three, 1, cases[1].values, 3) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("dtype 13 is not a kiln_dtype");
  }
  {
    /* A bool is a byte of 0 or 1. */
    const unsigned char bad[3] = {0, 1, 2};
    CHECK(kiln_tensor_write(h.tensors, "x_bool", KILN_BOOL, &three, 1, bad, 3) == KILN_INVALID_ARGUMENT);
    ERROR_SAYS("tensor 'x_bool' is bool, but element 2 of the data is 2");
  }
  one_routine_free(&h);
  if (failures) fprintf(stderr, "%d check(s) failed on %s\n", failures, device);
  return failures ? 1 : 0;
}
