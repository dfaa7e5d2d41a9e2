// The reference interpreter as a test's oracle for a pass over lowered kernels: random contents
// for a kernel's nodes, one run of a kernel on the interpreter, and a comparison within rounding.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "codegen/run_kernels.h"
#include "drivers/interp/interpreter.h"
#include "kiln/loop/loop.h"

namespace kiln::codegen_test {

template <typename T, typename Distribution>
inline Bytes random_bytes(int64_t count, Distribution d, std::mt19937* rng) {
  std::vector<T> v(static_cast<size_t>(count));
  for (T& x : v) x = d(*rng);
  return bytes_of(v);
}

// One buffer per node of `kernel`, random: floats (f32, f64) in [-1, 1], integers (i32, i64) in
// [-50, 50].
inline NodeData random_data(const ir::Program& program, const ir::Kernel& kernel, uint32_t seed) {
  std::mt19937 rng(seed);
  NodeData data;
  for (int node : kernel.nodes) {
    const ir::TensorNode& n = program.nodes.at(static_cast<size_t>(node));
    const int64_t count = n.element_count();
    data[node] = n.dtype == ir::DType::kF32   ? random_bytes<float>(count, std::uniform_real_distribution<float>(-1, 1), &rng)
                 : n.dtype == ir::DType::kF64 ? random_bytes<double>(count, std::uniform_real_distribution<double>(-1, 1), &rng)
                 : n.dtype == ir::DType::kI64 ? random_bytes<int64_t>(count, std::uniform_int_distribution<int64_t>(-50, 50), &rng)
                                              : random_bytes<int32_t>(count, std::uniform_int_distribution<int32_t>(-50, 50), &rng);
  }
  return data;
}

// Runs `kernel` on the reference interpreter over `data` with `workgroups` workgroups in x.
inline void interpret(const ir::Kernel& kernel, NodeData* data, uint32_t workgroups) {
  interp::Interpreter interpreter(kernel);
  std::vector<void*> bindings;
  std::vector<size_t> lengths;
  for (int node : kernel.nodes) {
    bindings.push_back(data->at(node).data());
    lengths.push_back(data->at(node).size());
  }
  kiln_dispatch_state_t state{};
  state.abi_version = KILN_KERNEL_ABI_VERSION;
  state.workgroup_count[0] = workgroups;
  state.workgroup_count[1] = state.workgroup_count[2] = 1;
  state.binding_count = static_cast<uint32_t>(bindings.size());
  state.bindings = bindings.data();
  state.binding_lengths = lengths.data();
  for (uint32_t x = 0; x < workgroups; ++x) {
    const kiln_workgroup_id_t id{x, 0, 0};
    ASSERT_EQ(interpreter.run_workgroup(&state, &id), interp::kInterpOk)
        << interp::interp_code_name(interpreter.run_workgroup(&state, &id));
  }
}

template <typename T>
inline bool close_values(const Bytes& a, const Bytes& b) {
  const std::vector<T> x = values_of<T>(a), y = values_of<T>(b);
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i], v = y[i];
    if (!(std::abs(u - v) <= 1e-5 + 1e-5 * std::abs(u))) return false;
  }
  return true;
}

// Whether two buffers of `type` agree within a relative and absolute 1e-5 (integers exactly).
inline bool close(ir::DType type, const Bytes& a, const Bytes& b) {
  if (a.size() != b.size()) return false;
  if (type == ir::DType::kF32) return close_values<float>(a, b);
  if (type == ir::DType::kF64) return close_values<double>(a, b);
  return a == b;
}


// Checks a pass's kernel against the kernel it was made from, on random contents (`seed`): on the
// reference interpreter it stores the very same bits (the original run with 3 workgroups, the
// transformed one with 2, so a pass may not depend on the split), and the generated C of the
// transformed kernel, run by the cpu device, agrees within rounding.
inline void expect_same_bits_and_cpu_agrees(const ir::LoweredProgram& lowered, const ir::Kernel& original,
                                            const ir::Kernel& transformed, uint32_t seed) {
  SCOPED_TRACE(ir::print_kernel(transformed));
  const NodeData inputs = random_data(lowered.program, original, seed);
  NodeData expected = inputs, got = inputs;
  interpret(original, &expected, 3);
  interpret(transformed, &got, 2);
  EXPECT_TRUE(got == expected) << "the transformed kernel stores other bits than the original";
  NodeData cpu = inputs;
  const std::vector<ir::Kernel> kernels = {transformed};
  ASSERT_TRUE(compile_and_run(kernels, &lowered.program, &cpu, 2).ok());
  for (const auto& [node, bytes] : expected) {
    EXPECT_TRUE(close(lowered.program.nodes.at(static_cast<size_t>(node)).dtype, bytes, cpu.at(node)))
        << "node " << node << " differs on the cpu device";
  }
}

}  // namespace kiln::codegen_test
