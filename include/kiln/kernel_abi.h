/* The CPU kernel ABI: the only thing compiled kernels need from kiln.
 *
 * An executable's export is a C function with the signature of kiln_kernel_fn_t. The CPU driver
 * calls it once per workgroup of a 3-D workgroup count; calls for different workgroups of one
 * dispatch may run concurrently on different threads. A kernel returns 0 on success; any other
 * value fails the dispatch (and every semaphore it would have signalled) with that code.
 *
 * This header is plain C99 so that generated code can include it, or paste it, without kiln.
 * Its layout is a stable ABI: fields are only ever appended. */
#ifndef KILN_KERNEL_ABI_H_
#define KILN_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_KERNEL_ABI_VERSION 1

typedef struct kiln_dispatch_state_t {
  uint32_t abi_version;          /* KILN_KERNEL_ABI_VERSION */
  uint32_t workgroup_count[3];   /* x, y, z */
  uint32_t binding_count;
  uint32_t constant_count;
  void* const* bindings;         /* binding_count base pointers, each at its binding's offset */
  const size_t* binding_lengths; /* byte length of each binding */
  const uint32_t* constants;     /* constant_count push constants */
  void* context;                 /* runtime context (RAL): its first field is the call function */
} kiln_dispatch_state_t;

typedef struct kiln_workgroup_id_t {
  uint32_t x, y, z;
} kiln_workgroup_id_t;

typedef int (*kiln_kernel_fn_t)(const kiln_dispatch_state_t* state,
                                const kiln_workgroup_id_t* workgroup_id);

/* In an executable's C source (format "c"), a line holding exactly this comment begins a
 * translation unit: the text before the first such line (includes, static helpers,
 * declarations) belongs to every unit, and each stretch from one such line to the next is a
 * unit of its own. The CPU driver may compile units separately, in parallel, and link them into
 * one shared object; the whole text is valid C as it is. */
#define KILN_UNIT_BOUNDARY "/* kiln: translation unit */"

#ifdef __cplusplus
}
#endif

#endif /* KILN_KERNEL_ABI_H_ */
