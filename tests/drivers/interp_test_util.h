// The fixture of the `interp` driver's tests (interp_test.cc, interp_semantics_test.cc): a device
// and a queue of the reference interpreter, loop-IR text compiled into executables, buffers
// written and read, dispatches run to completion, and expressions evaluated one per element.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/time.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"
#include "kiln/hal/driver.h"
#include "kiln/hal/queue.h"
#include "kiln/loop/loop.h"

namespace kiln::interp_test {

inline constexpr int64_t kWaitMs = 10000;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

class InterpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = drivers::builtin_registry().create_device("interp");
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    device_ = *device;
    auto queue = device_->create_queue();
    ASSERT_TRUE(queue.ok()) << queue.status().to_string();
    queue_ = *queue;
  }

  // Exports for every kernel of `text`, in text order, with their node counts.
  static std::vector<hal::ExportInfo> exports_of(const std::string& text) {
    std::vector<hal::ExportInfo> exports;
    auto kernels = ir::parse_kernels(text);
    if (!kernels.ok()) return exports;
    for (const ir::Kernel& k : *kernels) {
      exports.push_back({k.name, static_cast<uint32_t>(k.nodes.size()), 0});
    }
    return exports;
  }

  Result<hal::ExecutableRef> compile(const std::string& text,
                                     std::vector<hal::ExportInfo> exports = {}) {
    hal::ExecutableSource source;
    source.format = "kiln-loop";
    source.source = text;
    source.exports = exports.empty() ? exports_of(text) : std::move(exports);
    source.label = "interp_test";
    return device_->compile_executable(source);
  }

  hal::ExecutableRef must_compile(const std::string& text) {
    auto executable = compile(text);
    EXPECT_TRUE(executable.ok()) << executable.status().to_string();
    return executable.ok() ? *executable : nullptr;
  }

  template <typename T>
  hal::BufferRef buffer(const std::vector<T>& values) {
    hal::BufferParams params;
    auto buffer = device_->allocator().allocate(params, values.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
    if (!values.empty()) {
      EXPECT_TRUE((*buffer)->write_data(0, values.data(), values.size() * sizeof(T)).ok());
    }
    return *buffer;
  }

  template <typename T>
  std::vector<T> read(const hal::BufferRef& buffer) {
    std::vector<T> values(buffer->byte_length() / sizeof(T));
    if (!values.empty()) {
      EXPECT_TRUE(buffer->read_data(0, values.data(), values.size() * sizeof(T)).ok());
    }
    return values;
  }

  // Dispatches export `ordinal` over `workgroups` in x and waits; the dispatch's status.
  Status run(const hal::ExecutableRef& executable, uint32_t ordinal, uint32_t workgroups,
             std::vector<hal::BufferBinding> bindings) {
    hal::DispatchCommand dispatch;
    dispatch.executable = executable;
    dispatch.export_ordinal = ordinal;
    dispatch.workgroups = {workgroups, 1, 1};
    dispatch.bindings = std::move(bindings);
    auto done = device_->create_semaphore();
    Status submitted = queue_->dispatch({}, {{done, 1}}, std::move(dispatch));
    if (!submitted.ok()) return submitted;
    return done->wait(1, Timeout::after_ms(kWaitMs));
  }

  // Runs `exprs` (loop-IR expressions of type `type`, without loop variables) in one kernel
  // that stores expression i at element i of a buffer of T, and returns that buffer.
  template <typename T>
  std::vector<T> eval(const std::string& type, const std::vector<std::string>& exprs) {
    std::string text = "(kernel e (nodes 0) (vars 0) (locals 0) (block";
    for (size_t i = 0; i < exprs.size(); ++i) {
      text += "\n  (store 0 " + std::to_string(i) + " " + exprs[i] + ")";
    }
    text += "))";
    auto executable = compile(text);
    EXPECT_TRUE(executable.ok()) << executable.status().to_string();
    if (!executable.ok()) return {};
    auto parsed = ir::parse_kernel(text);
    for (const ir::LStmtRef& s : parsed->body->body) {
      if (s->value->type != (type == "f32"   ? ir::DType::kF32
                             : type == "f64" ? ir::DType::kF64
                             : type == "i32" ? ir::DType::kI32
                                             : ir::DType::kI64)) {
        ADD_FAILURE() << "an expression is not of type " << type;
      }
    }
    hal::BufferRef out = buffer(std::vector<T>(exprs.size(), T(77)));
    Status status = run(*executable, 0, 1, {{out}});
    EXPECT_TRUE(status.ok()) << status.to_string();
    return read<T>(out);
  }

  hal::DeviceRef device_;
  hal::QueueRef queue_;
};

}  // namespace kiln::interp_test
