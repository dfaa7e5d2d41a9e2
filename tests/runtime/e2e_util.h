// Helpers shared by the compiler's end-to-end tests (examples, differential, golden): temporary
// directories, devices with a private kernel cache, deterministic random inputs, running a
// program's routines and comparing tensors between devices within a tolerance.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/driver_availability.h"
#include "common/temp_dir.h"
#include "kiln/base/random.h"
#include "kiln/drivers/drivers.h"
#include "kiln/ir/program.h"
#include "kiln/loop/lower.h"
#include "kiln/loop/op_eval.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::e2e {

// A fresh directory per test (kiln-e2e-XXXXXX), removed whatever its permissions.
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("kiln-e2e") {}
};

// A device of the built-in registry ("cpu", "interp"), with its kernel cache in `cache_dir`, and
// `threads` threads where above 0 (DeviceOptions::worker_threads).
inline Result<hal::DeviceRef> open_device(const std::string& name, const std::string& cache_dir, uint32_t threads = 0) {
  hal::DeviceOptions options;
  options.cache_dir = cache_dir;
  if (threads > 0) options.worker_threads = threads;
  return drivers::builtin_registry().create_device(name, options);
}

using test::driver_availability;

inline size_t byte_size(const ir::TensorNode& node) {
  return static_cast<size_t>(node.element_count()) * ir::dtype_size(node.dtype);
}

// Host values of one tensor, as raw bytes of its dtype.
struct HostTensor {
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> dims;
  std::string bytes;

  int64_t size() const { return static_cast<int64_t>(bytes.size() / ir::dtype_size(dtype)); }
  // Element i as a double (exact for every type but i64 / u64 beyond 2^53; a u64 unsigned).
  double at(int64_t i) const {
    const ir::Scalar v = ir::load_scalar(dtype, bytes.data() + static_cast<size_t>(i) * ir::dtype_size(dtype));
    return ir::is_float_type(dtype) ? v.f : ir::int_to_double(dtype, v.i);
  }
  // Element i as stored: floats rounded to the type (f16, bf16: to nearest even), integers
  // truncated toward zero and saturated at the type's range, bool != 0.
  void set(int64_t i, double v) {
    ir::Scalar s;
    if (ir::is_float_type(dtype)) s.f = v;
    else s.i = ir::saturate_int(dtype, v);
    ir::store_scalar(dtype, s, bytes.data() + static_cast<size_t>(i) * ir::dtype_size(dtype));
  }
  std::vector<double> values() const {
    std::vector<double> out(static_cast<size_t>(size()));
    for (int64_t i = 0; i < size(); ++i) out[static_cast<size_t>(i)] = at(i);
    return out;
  }
};

inline HostTensor empty_tensor(const ir::TensorNode& node) {
  return HostTensor{node.dtype, node.dims, std::string(byte_size(node), '\0')};
}

// Deterministic pseudo-random values for an input, as `kiln run` draws them: floats uniform in
// [-1, 1), signed integers in [-8, 8], unsigned ones in [0, 16], bools 0 or 1.
inline HostTensor random_tensor(const ir::TensorNode& node, uint64_t seed) {
  HostTensor t = empty_tensor(node);
  Random random = Random::for_name(seed, "input:" + node.name);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (ir::is_float_type(node.dtype)) {
      t.set(i, random.uniform(-1, 1));
    } else if (node.dtype == ir::DType::kBool) {
      t.set(i, static_cast<double>(random.next_u64() % 2));
    } else if (ir::is_unsigned_type(node.dtype)) {
      t.set(i, static_cast<double>(random.next_u64() % 17));
    } else {
      t.set(i, static_cast<double>(static_cast<int64_t>(random.next_u64() % 17) - 8));
    }
  }
  return t;
}

// "[1, 2, 3]" for element `flat` of a tensor of dims `dims`.
inline std::string index_string(const std::vector<int64_t>& dims, int64_t flat) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) out += (d ? ", " : "") + std::to_string(idx[d]);
  return out + "]";
}

struct Tolerance {
  double rel = 1e-4;
  double abs = 1e-5;
};

inline bool close_enough(double expected, double actual, Tolerance tol) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return expected == actual;
  return std::fabs(expected - actual) <= tol.abs + tol.rel * std::fabs(expected);
}

// The first element where `actual` differs from `expected` (exactly for integers and bool, within
// `tol` for floats), described; nullopt when they agree.
inline std::optional<std::string> first_difference(const std::string& name, const HostTensor& expected,
                                                   const HostTensor& actual, Tolerance tol = {}) {
  if (expected.bytes.size() != actual.bytes.size() || expected.dtype != actual.dtype) {
    return name + ": sizes differ (" + std::to_string(expected.bytes.size()) + " vs " +
           std::to_string(actual.bytes.size()) + " bytes)";
  }
  int mismatches = 0;
  std::optional<std::string> first;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double e = expected.at(i), a = actual.at(i);
    const size_t width = ir::dtype_size(expected.dtype), at = static_cast<size_t>(i) * width;
    const bool ok = !ir::is_float_type(expected.dtype)
                        ? std::memcmp(expected.bytes.data() + at, actual.bytes.data() + at, width) == 0
                        : close_enough(e, a, tol);
    if (ok) continue;
    if (!first) {
      std::ostringstream os;
      os.precision(9);
      os << name << index_string(expected.dims, i) << " (element " << i << " of "
         << expected.size() << "): expected " << e << ", got " << a;
      first = os.str();
    }
    ++mismatches;
  }
  if (first) *first += " (" + std::to_string(mismatches) + " elements differ)";
  return first;
}

// Reads a stored node back.
inline Result<HostTensor> read_tensor(runtime::ProgramInstance& instance, const ir::TensorNode& node) {
  HostTensor t = empty_tensor(node);
  Status st = instance.read(node.name, t.bytes.data(), t.bytes.size());
  if (!st.ok()) return st;
  return t;
}

inline Status write_tensor(runtime::ProgramInstance& instance, const std::string& name,
                           const HostTensor& t) {
  return instance.write(name, t.bytes.data(), t.bytes.size());
}

// The routines `kiln run` runs by default: main if the file has one, else all in file order.
inline std::vector<std::string> default_routines(const ir::Program& program) {
  std::vector<std::string> out;
  if (program.find_routine("main")) return {"main"};
  for (const ir::Routine& r : program.routines) out.push_back(r.name);
  return out;
}

// The devices end-to-end tests run on: interp, cpu, opencl where a platform is present, and cuda
// where its driver starts (a GPU machine: scripts/cuda-device-check.sh runs these suites there).
inline std::vector<std::string> present_devices() {
  std::vector<std::string> names = {"interp", "cpu"};
  if (driver_availability("opencl").ok()) names.push_back("opencl");
  if (driver_availability("cuda").ok()) names.push_back("cuda");
  return names;
}

// Lowering without inlining, fusion, local arrays, shared buffers, optimization passes or
// automatic calls: the plain translation, which tests compare with the default.
inline ir::LowerOptions plain_lowering() {
  ir::LowerOptions plain;
  plain.inline_virtual = plain.fuse = plain.collapse = plain.local_arrays = plain.optimize = false;
  plain.shared_buffers = false;
  plain.auto_calls = false;
  return plain;
}

// Nodes the host can read back after a run: outputs and params.
inline std::vector<const ir::TensorNode*> result_nodes(const ir::Program& program) {
  std::vector<const ir::TensorNode*> out;
  for (const ir::TensorNode& node : program.nodes) {
    if (node.role == ir::Role::kOutput || node.role == ir::Role::kParam) out.push_back(&node);
  }
  return out;
}

}  // namespace kiln::e2e
