/* The RAL ABI: how compiled code reaches the runtime.
 *
 * Compiled code receives a kiln_ral_context_t* (the CPU kernel ABI passes it as
 * kiln_dispatch_state_t::context). Its first field is the call function, and compiled code calls
 * the runtime only through it:
 *
 *     int rc = ctx->call(ctx, "sort___cpu___pvoid_m1df32_m1df32_i64___void", args);
 *
 * `args` holds one pointer per argument, each pointing to the argument's value, then one pointer
 * per result, each pointing to where the result is stored. The first argument of every function
 * is the context itself (code `pvoid`). A tensor is passed as a memref (below). The call returns 0
 * on success; any other value means the function failed, the runtime has recorded why (the
 * function, the device and the reason), and compiled code must stop and return the value.
 *
 * The built shared object therefore has no link-time dependency on kiln: it names no kiln symbol.
 * Plain C99; fields are only ever appended (abi_version says which are there). docs/ral.md has
 * the name mangling, the type codes and the lifetimes. */
#ifndef KILN_RAL_ABI_H_
#define KILN_RAL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_RAL_ABI_VERSION 1

typedef struct kiln_ral_context_t kiln_ral_context_t;

typedef int (*kiln_ral_call_fn_t)(kiln_ral_context_t* ctx, const char* name, void** args);

struct kiln_ral_context_t {
  kiln_ral_call_fn_t call; /* always first */
  uint32_t abi_version;    /* KILN_RAL_ABI_VERSION */
  uint32_t reserved;
  void* impl;              /* the runtime's execution context; opaque to compiled code */
};

/* A rank-N memref (N >= 1): the data pointer, then N sizes (elements, row-major, the last
 * contiguous). kiln_ral_memref(N) declares the struct for rank N, e.g.
 * kiln_ral_memref(2) m = {p, {4, 8}}. A rank-0 memref is the data pointer alone. */
#define kiln_ral_memref(N) \
  struct {                 \
    void* data;            \
    int64_t sizes[N];      \
  }

/* A memref of any rank and element type, for functions that take every shape (code `buf`):
 * recv_input and send_output. `dtype` is kiln.h's kiln_dtype: 0 f32, 1 f64, 2 i32, 3 i64, 4 bool,
 * 5 i8, 6 u8, 7 i16, 8 u16, 9 u32, 10 u64, 11 f16, 12 bf16. */
typedef struct kiln_ral_buffer_t {
  void* data;
  int32_t dtype;
  int32_t rank;
  const int64_t* sizes;
} kiln_ral_buffer_t;

#ifdef __cplusplus
}
#endif

#endif /* KILN_RAL_ABI_H_ */
