// kiln.Tensor: an array the Python side holds as kiln's: a view of a compiled program's tensor
// (its device array, where the device's memory is host memory) or a host array imported through
// DLPack. Either way NumPy and DLPack consumers see the same memory, without a copy; a tensor in
// a device's own memory (OpenCL, CUDA) is exported through DLPack as that memory.
#pragma once

#include <memory>
#include <string>

#include <nanobind/nanobind.h>

#include "python/host_array.h"
#include "runtime/dlpack.h"

namespace kiln::python {

class CompiledProgram;

class Tensor {
 public:
  // `host.data` is null for a tensor in device memory the host cannot address (OpenCL, CUDA):
  // then numpy() is a copy read through `program`, and DLPack exports the device memory of
  // `dl_device` (or a host copy when asked for one).
  Tensor(std::string name, HostArray host, std::shared_ptr<CompiledProgram> program, std::string device,
         dlpack::DLDevice dl_device = {dlpack::kDLCPU, 0})
      : name_(std::move(name)),
        host_(std::move(host)),
        program_(std::move(program)),
        device_(std::move(device)),
        dl_device_(dl_device) {}

  const std::string& name() const { return name_; }
  const std::string& device() const { return device_; }
  const HostArray& host() const { return host_; }
  nanobind::tuple shape() const;
  nanobind::object dtype() const;  // a numpy.dtype
  // A NumPy view of the memory, or a copy for device memory.
  nanobind::object numpy() const;
  // __dlpack__(stream, max_version, dl_device, copy) as the Python array API gives it (the
  // arguments as given, None where not): a capsule over the memory, over a copy of it with
  // `copy`, or over a host copy of device memory for dl_device (kDLCPU, 0). BufferError for what
  // cannot be exported; ValueError for a stream the memory does not take.
  nanobind::object dlpack(nanobind::handle stream, nanobind::handle max_version, nanobind::handle dl_device,
                          nanobind::handle copy) const;
  // (device type, device id): (kDLCPU, 0) for host memory.
  nanobind::tuple dlpack_device() const;

 private:
  bool in_device_memory() const { return !host_.data && program_; }

  std::string name_;
  HostArray host_;
  std::shared_ptr<CompiledProgram> program_;
  std::string device_;
  dlpack::DLDevice dl_device_;
};

}  // namespace kiln::python
