// kiln.Tensor: an array the Python side holds as kiln's: a view of a compiled program's tensor
// (its device array, where the device's memory is host memory) or a host array imported through
// DLPack. Either way NumPy and DLPack consumers see the same memory, without a copy.
#pragma once

#include <memory>
#include <string>

#include <nanobind/nanobind.h>

#include "python/host_array.h"

namespace kiln::python {

class CompiledProgram;

class Tensor {
 public:
  // `host.data` is null for a tensor in device memory the host cannot address (OpenCL): then
  // numpy() is a copy read through `program`, and DLPack export is refused.
  Tensor(std::string name, HostArray host, std::shared_ptr<CompiledProgram> program, std::string device)
      : name_(std::move(name)), host_(std::move(host)), program_(std::move(program)), device_(std::move(device)) {}

  const std::string& name() const { return name_; }
  const std::string& device() const { return device_; }
  const HostArray& host() const { return host_; }
  nanobind::tuple shape() const;
  nanobind::object dtype() const;  // a numpy.dtype
  // A NumPy view of the memory, or a copy for device memory.
  nanobind::object numpy() const;
  // The DLPack protocol (host memory only; BufferError otherwise): a capsule over the memory, or
  // over a copy of it with `copy`; DLPack 1.0's kind when `versioned`.
  nanobind::object dlpack(bool versioned, bool copy) const;
  nanobind::tuple dlpack_device() const;

 private:
  std::string name_;
  HostArray host_;
  std::shared_ptr<CompiledProgram> program_;
  std::string device_;
};

}  // namespace kiln::python
