/* Uses the C API of an installed kiln, built with `cc $(pkg-config --cflags --libs kiln)`:
 * runs y = x * 2 + 1 on the cpu device. Exits 0 when the result matches. */
#include <stdio.h>

#include <kiln/kiln.h>

int main(void) {
  static const int64_t dims[1] = {4};
  const float x[4] = {1, 2, 3, 4};
  float y[4] = {0, 0, 0, 0};
  kiln_program* program = NULL;
  kiln_tensors* tensors = NULL;
  kiln_backend* backend = NULL;
  kiln_stream* stream = NULL;
  kiln_code* code = NULL;
  kiln_context *root = NULL, *linked = NULL;
  kiln_routine* routine = NULL;
  int ok = kiln_program_parse("input x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * 2 + 1\n",
                              "consumer.kiln", &program) == KILN_OK &&
           kiln_tensors_create(program, 0, &tensors) == KILN_OK &&
           kiln_backend_create("cpu", &backend) == KILN_OK &&
           kiln_stream_create(backend, &stream) == KILN_OK &&
           kiln_compile(backend, program, NULL, 0, 0, &code) == KILN_OK &&
           kiln_context_create(backend, stream, tensors, &root) == KILN_OK &&
           kiln_link(root, code, &linked) == KILN_OK &&
           kiln_routine_find(linked, "main", &routine) == KILN_OK &&
           kiln_tensor_write(tensors, "x", KILN_F32, dims, 1, x, sizeof x) == KILN_OK &&
           kiln_routine_run(routine) == KILN_OK &&
           kiln_tensor_read(tensors, "y", KILN_F32, dims, 1, y, sizeof y) == KILN_OK;
  if (!ok) fprintf(stderr, "kiln: %s\n", kiln_last_error());
  kiln_routine_free(routine);
  kiln_context_free(linked);
  kiln_context_free(root);
  kiln_code_free(code);
  kiln_stream_free(stream);
  kiln_backend_free(backend);
  kiln_tensors_free(tensors);
  kiln_program_free(program);
  if (!ok || y[0] != 3 || y[1] != 5 || y[2] != 7 || y[3] != 9) return 1;
  printf("C consumer of the installed kiln (pkg-config, kiln %s): y = 3 5 7 9\n", kiln_version());
  return 0;
}
