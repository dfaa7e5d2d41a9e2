#include "ral/library/clblast.h"

#include <string>
#include <vector>

#include "drivers/opencl/cl_allocator.h"
#include "kiln/base/shared_library.h"

namespace kiln::ral::library {

namespace {

using opencl::cl_command_queue;
using opencl::cl_event;
using opencl::cl_mem;

// CLBlast's C API (clblast_c.h), declared here so that kiln builds without the package.
constexpr int kRowMajor = 101;
constexpr int kTransposeNo = 111, kTransposeYes = 112;
template <typename T>
using GemmFn = int (*)(int layout, int a_transpose, int b_transpose, size_t m, size_t n, size_t k, T alpha,
                       cl_mem a, size_t a_offset, size_t a_ld, cl_mem b, size_t b_offset, size_t b_ld, T beta,
                       cl_mem c, size_t c_offset, size_t c_ld, cl_command_queue* queue, cl_event* event);

struct ClBlast {
  GemmFn<float> sgemm = nullptr;
  GemmFn<double> dgemm = nullptr;
  Status status;
};

// Loaded once per process and never unloaded (its cached programs live in the OpenCL runtime).
const ClBlast& clblast() {
  static const ClBlast loaded = [] {
    ClBlast out;
    Result<void*> loaded = load_shared_library({"libclblast.so.1", "libclblast.so"});
    if (!loaded.ok()) {
      out.status = unavailable_error("CLBlast was not found (" + loaded.status().message() + "); install libclblast1");
      return out;
    }
    SymbolBinder binder(*loaded);
    binder.bind(out.sgemm, "CLBlastSgemm");
    binder.bind(out.dgemm, "CLBlastDgemm");
    if (!binder.missing().empty()) out.status = unavailable_error("the CLBlast library lacks " + binder.missing());
    return out;
  }();
  return loaded;
}

// "CLBlastNoDoublePrecision (-2044)"; OpenCL's own codes as opencl::error_name gives them.
std::string clblast_error_name(int code) {
  if (code > -1000) return opencl::error_name(code);
  const char* name = "CLBlast status";
  switch (code) {
    case -1024: name = "CLBlastNotImplemented"; break;
    case -1022: name = "CLBlastInvalidMatrixA"; break;
    case -1021: name = "CLBlastInvalidMatrixB"; break;
    case -1020: name = "CLBlastInvalidMatrixC"; break;
    case -2048: name = "CLBlastKernelLaunchError"; break;
    case -2047: name = "CLBlastKernelRunError"; break;
    case -2046: name = "CLBlastInvalidLocalMemUsage"; break;
    case -2044: name = "CLBlastNoDoublePrecision"; break;
    case -2039: name = "CLBlastUnknownError"; break;
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

// The cl_mem of `buffer` and its offset in elements of T.
Status element_offset(const hal::Buffer& buffer, size_t element, const char* name, cl_mem* mem, size_t* offset) {
  const opencl::ClStorage* storage = opencl::cl_storage(buffer);
  if (!storage) return invalid_argument_error(std::string("gemm: ") + name + " is not OpenCL memory");
  if (buffer.byte_offset() % element) {
    return invalid_argument_error(std::string("gemm: ") + name + " starts at byte " + std::to_string(buffer.byte_offset()) +
                                  ", not a multiple of its element size");
  }
  *mem = storage->mem();
  *offset = buffer.byte_offset() / element;
  return Status();
}

}  // namespace

Result<GemmPlace> opencl_gemm(const hal::Buffer& c) {
  const Status& loaded = clblast().status;
  KILN_ASSIGN_OR_RETURN(std::optional<GemmPlace> asked, gemm_place_asked("KILN_OPENCL_GEMM", "clblast", loaded));
  if (asked) return *asked;
  const opencl::ClStorage* storage = opencl::cl_storage(c);
  if (!storage) return invalid_argument_error("gemm: c is not OpenCL memory");
  return loaded.ok() && !storage->context()->record().cpu ? GemmPlace::kLibrary : GemmPlace::kHost;
}

template <typename T>
Status clblast_gemm(const hal::Buffer& a, const hal::Buffer& b, const hal::Buffer& c, const GemmShape& s, T alpha,
                    T beta) {
  const ClBlast& lib = clblast();
  KILN_RETURN_IF_ERROR(lib.status);
  cl_mem a_mem, b_mem, c_mem;
  size_t a_offset, b_offset, c_offset;
  KILN_RETURN_IF_ERROR(element_offset(a, sizeof(T), "a", &a_mem, &a_offset));
  KILN_RETURN_IF_ERROR(element_offset(b, sizeof(T), "b", &b_mem, &b_offset));
  KILN_RETURN_IF_ERROR(element_offset(c, sizeof(T), "c", &c_mem, &c_offset));
  // The context's host queue is in order and used only for blocking work, as this is: the call's
  // waits are met, so its inputs are on the device; it returns when c is written.
  const opencl::ClContext& context = *opencl::cl_storage(c)->context();
  cl_command_queue queue = context.host_queue();
  GemmFn<T> gemm;
  if constexpr (std::is_same_v<T, float>) {
    gemm = lib.sgemm;
  } else {
    gemm = lib.dgemm;
  }
  auto at = [](size_t offset, int64_t product, int64_t stride) {
    return offset + static_cast<size_t>(product) * static_cast<size_t>(stride);
  };
  // The products are enqueued one after another, then waited for together.
  std::vector<cl_event> events;
  int code = 0;
  for (int64_t p = 0; p < s.batch && code == 0; ++p) {
    cl_event event = nullptr;
    code = gemm(kRowMajor, s.transpose_a ? kTransposeYes : kTransposeNo, s.transpose_b ? kTransposeYes : kTransposeNo,
                static_cast<size_t>(s.m), static_cast<size_t>(s.n), static_cast<size_t>(s.k), alpha, a_mem,
                at(a_offset, p, s.stride_a()), static_cast<size_t>(s.lda()), b_mem, at(b_offset, p, s.stride_b()),
                static_cast<size_t>(s.ldb()), beta, c_mem, at(c_offset, p, s.stride_c()), static_cast<size_t>(s.ldc()),
                &queue, &event);
    if (code == 0) events.push_back(event);
  }
  const opencl::cl_int waited =
      events.empty() ? 0 : context.api().WaitForEvents(static_cast<opencl::cl_uint>(events.size()), events.data());
  for (cl_event e : events) context.api().ReleaseEvent(e);
  if (code != 0) {
    return internal_error(std::string(std::is_same_v<T, float> ? "CLBlastSgemm" : "CLBlastDgemm") + " failed: " +
                          clblast_error_name(code));
  }
  if (waited != 0) return opencl::cl_error("clWaitForEvents", waited, "after CLBlast's gemm");
  return Status();
}

template Status clblast_gemm<float>(const hal::Buffer&, const hal::Buffer&, const hal::Buffer&, const GemmShape&, float,
                                    float);
template Status clblast_gemm<double>(const hal::Buffer&, const hal::Buffer&, const hal::Buffer&, const GemmShape&,
                                     double, double);

}  // namespace kiln::ral::library
