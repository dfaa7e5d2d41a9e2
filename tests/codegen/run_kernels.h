// Running generated C for real in tests: kernels emitted in the C dialect, compiled by the system C
// compiler through the CPU device (no kernel cache), dispatched on a HAL queue, and their buffers
// read back.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernels.h"
#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"

namespace kiln::codegen_test {

inline constexpr int64_t kWaitMs = 60000;

using Bytes = std::vector<std::byte>;
using NodeData = std::map<int, Bytes>;  // node id -> buffer contents

template <typename T>
inline Bytes bytes_of(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> values_of(const Bytes& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline hal::DeviceRef cpu_device() {
  static hal::DeviceRef device = [] {
    hal::DeviceOptions options;
    options.cache_dir = "";  // every build compiles: the test is about the compiler's input
    Result<hal::DeviceRef> created = drivers::builtin_registry().create_device("cpu", options);
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      return hal::DeviceRef();
    }
    return *created;
  }();
  return device;
}

inline Result<hal::ExecutableRef> compile(std::span<const Kernel> kernels, const ir::Program* program) {
  KILN_ASSIGN_OR_RETURN(std::string source, codegen::emit_kernels(kernels, program, {}));
  hal::ExecutableSource src;
  src.format = std::string(codegen::dialect_format(codegen::Dialect::kC));
  src.source = std::move(source);
  for (const Kernel& k : kernels) {
    src.exports.push_back({k.name, static_cast<uint32_t>(k.nodes.size()), 0});
  }
  src.label = "codegen_test:" + (kernels.empty() ? std::string() : kernels[0].name);
  hal::DeviceRef device = cpu_device();
  if (!device) return internal_error("no CPU device");
  return device->compile_executable(src);
}

// Runs `kernels` in order, kernel k with workgroups(k) = {x, y, z}, on one buffer per node
// holding data[node]; then reads every buffer back into `data`.
using WorkgroupsFn = std::function<std::array<uint32_t, 3>(const Kernel&)>;

inline Status run(const hal::ExecutableRef& executable, std::span<const Kernel> kernels, NodeData* data,
           const WorkgroupsFn& workgroups) {
  hal::DeviceRef device = cpu_device();
  std::map<int, hal::BufferRef> buffers;
  for (auto& [node, bytes] : *data) {
    KILN_ASSIGN_OR_RETURN(hal::BufferRef buffer, device->allocator().allocate({}, bytes.size()));
    KILN_RETURN_IF_ERROR(buffer->write_data(0, bytes.data(), bytes.size()));
    buffers[node] = buffer;
  }
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, device->create_queue("codegen-test"));
  auto timeline = device->create_semaphore();
  uint64_t value = 0;
  for (const Kernel& k : kernels) {
    hal::DispatchCommand dispatch;
    dispatch.executable = executable;
    KILN_ASSIGN_OR_RETURN(dispatch.export_ordinal, executable->lookup_export(k.name));
    dispatch.workgroups = workgroups(k);
    for (int node : k.nodes) {
      if (!buffers.count(node)) return invalid_argument_error("no data for node " + std::to_string(node));
      dispatch.bindings.push_back({buffers[node]});
    }
    hal::SemaphoreList waits;
    if (value > 0) waits.push_back({timeline, value});
    KILN_RETURN_IF_ERROR(queue->dispatch(waits, {{timeline, value + 1}}, std::move(dispatch)));
    ++value;
  }
  KILN_RETURN_IF_ERROR(timeline->wait(value, Timeout::after_ms(kWaitMs)));
  for (auto& [node, bytes] : *data) {
    KILN_RETURN_IF_ERROR(buffers[node]->read_data(0, bytes.data(), bytes.size()));
  }
  return Status();
}

// Compiles and runs with W workgroups in x for every kernel.
inline Status compile_and_run(std::span<const Kernel> kernels, const ir::Program* program, NodeData* data,
                       uint32_t w) {
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, compile(kernels, program));
  return run(executable, kernels, data, [w](const Kernel&) { return std::array<uint32_t, 3>{w, 1, 1}; });
}

}  // namespace kiln::codegen_test
