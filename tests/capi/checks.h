/* Checks for the C API's tests (plain C99): CHECK counts a failure and goes on, REQUIRE ends the
 * test (returns 1 from the calling function); both print the condition and kiln's last error. */
#ifndef KILN_TESTS_CAPI_CHECKS_H_
#define KILN_TESTS_CAPI_CHECKS_H_

#include <stdio.h>
#include <string.h>

#include "kiln/kiln.h"

static int failures = 0;

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, \
              #cond, kiln_last_error());                                           \
      ++failures;                                                                  \
    }                                                                              \
  } while (0)

#define REQUIRE(cond)                                                              \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: REQUIRE(%s) failed; last error: %s\n", __FILE__, __LINE__, \
              #cond, kiln_last_error());                                           \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

#define OK(call) CHECK((call) == KILN_OK)

/* The last error contains `text`. */
#define ERROR_SAYS(text) CHECK(strstr(kiln_last_error(), text) != NULL)

/* Whether kiln_devices() lists `device`. */
static int device_present(const char* device) {
  const char* names[16];
  size_t count = 0, i;
  if (kiln_devices(names, 16, &count) != KILN_OK) return 0;
  for (i = 0; i < count && i < 16; ++i) {
    if (strcmp(names[i], device) == 0) return 1;
  }
  return 0;
}

#endif /* KILN_TESTS_CAPI_CHECKS_H_ */
