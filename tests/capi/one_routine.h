/* One program compiled for a device and linked on one stream, with one routine found: the handles
 * most C API tests need, made and freed in one call each (plain C99). */
#ifndef KILN_TESTS_CAPI_ONE_ROUTINE_H_
#define KILN_TESTS_CAPI_ONE_ROUTINE_H_

#include "kiln/kiln.h"

struct one_routine {
  kiln_program* program;
  kiln_tensors* tensors;
  kiln_backend* backend;
  kiln_stream* stream;
  kiln_code* code;
  kiln_context* root;
  kiln_context* linked;
  kiln_routine* routine;
};

/* Parses `text`, compiles every routine for `device` and finds `routine`; the first failure's
 * status (kiln_last_error() has its message), the handles made so far left for one_routine_free. */
static kiln_status one_routine_open(struct one_routine* h, const char* device, const char* text,
                                    const char* routine) {
  kiln_status s;
  struct one_routine none = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  *h = none;
  if ((s = kiln_program_parse(text, "test.kiln", &h->program)) != KILN_OK) return s;
  if ((s = kiln_tensors_create(h->program, 0, &h->tensors)) != KILN_OK) return s;
  if ((s = kiln_backend_create(device, &h->backend)) != KILN_OK) return s;
  if ((s = kiln_stream_create(h->backend, &h->stream)) != KILN_OK) return s;
  if ((s = kiln_compile(h->backend, h->program, NULL, 0, 0, &h->code)) != KILN_OK) return s;
  if ((s = kiln_context_create(h->backend, h->stream, h->tensors, &h->root)) != KILN_OK) return s;
  if ((s = kiln_link(h->root, h->code, &h->linked)) != KILN_OK) return s;
  return kiln_routine_find(h->linked, routine, &h->routine);
}

static void one_routine_free(struct one_routine* h) {
  kiln_routine_free(h->routine);
  kiln_context_free(h->linked);
  kiln_context_free(h->root);
  kiln_code_free(h->code);
  kiln_stream_free(h->stream);
  kiln_backend_free(h->backend);
  kiln_tensors_free(h->tensors);
  kiln_program_free(h->program);
}

#endif /* KILN_TESTS_CAPI_ONE_ROUTINE_H_ */
