#include "python/tensor.h"

#include <cstring>

#include "python/arrays.h"
#include "python/compiled_program.h"
#include "python/dtypes.h"
#include "python/dlpack.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

bool same_device(dlpack::DLDevice a, dlpack::DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

std::string device_tuple(dlpack::DLDevice d) {
  return "(" + std::to_string(d.device_type) + ", " + std::to_string(d.device_id) + ")";
}

}  // namespace

nb::tuple Tensor::shape() const {
  nb::list dims;
  for (int64_t d : host_.dims) dims.append(d);
  return nb::tuple(dims);
}

nb::object Tensor::dtype() const { return nb::borrow(numpy_dtype(host_.dtype)); }

nb::object Tensor::numpy() const {
  if (host_.data) return numpy_view(host_);
  return program_->get(name_);
}

nb::object Tensor::dlpack(nb::handle stream, nb::handle max_version, nb::handle dl_device, nb::handle copy) const {
  const std::string what = "tensor '" + name_ + "'";
  const bool versioned = !max_version.is_none() && nb::cast<int>(nb::cast<nb::tuple>(max_version)[0]) >= 1;
  const bool device_memory = !host_.data && program_ && dl_device_.device_type != dlpack::kDLCPU;
  dlpack::DLDevice target = dl_device_;
  if (!dl_device.is_none()) {
    nb::tuple t = nb::cast<nb::tuple>(dl_device);
    if (t.size() != 2) throw nb::value_error((what + ": dl_device must be (device type, device id)").c_str());
    target = {nb::cast<int32_t>(t[0]), nb::cast<int32_t>(t[1])};
  }
  // Device memory goes to the host as a copy, when asked for (kDLCPU) and a copy is allowed.
  const bool to_host = device_memory && same_device(target, {dlpack::kDLCPU, 0});
  const std::string where = dlpack::device_text(dl_device_.device_type) + " of '" + device_ + "'";
  if (!same_device(target, dl_device_) && !to_host) {
    throw nb::buffer_error((what + " is in " + where + " " + device_tuple(dl_device_) + "; it exports there" +
                            (device_memory ? " or to the host as a copy (dl_device=(1, 0))" : "") +
                            ", not to " + device_tuple(target))
                               .c_str());
  }
  const std::optional<bool> copying = copy.is_none() ? std::nullopt : std::optional<bool>(nb::cast<bool>(copy));
  if (to_host && copying == false) {
    throw nb::buffer_error((what + " is in " + where + ": a host array of it is a copy, which copy=False refuses").c_str());
  }
  if (device_memory && !to_host && copying == true) {
    throw nb::buffer_error((what + " is in " + where + ": kiln copies device memory to the host only "
                            "(dl_device=(1, 0)), not within the device")
                               .c_str());
  }
  // The stream protocol: on CUDA the consumer's stream (an integer; 0 is ambiguous, -1 asks for
  // no synchronization); kiln waits on the host for the tensor's writers before it exports, which
  // is correct for any consumer stream. Host memory and OpenCL have no streams: None only.
  if (!stream.is_none()) {
    if (!device_memory || to_host || dl_device_.device_type != dlpack::kDLCUDA) {
      throw nb::value_error((what + ": stream must be None for " +
                             (device_memory && !to_host ? where : std::string("host memory")) + ", not " +
                             nb::str(stream).c_str())
                                .c_str());
    }
    int64_t s = 0;
    if (!nb::try_cast(stream, s) || s < -1 || s == 0) {
      throw nb::value_error((what + ": stream " + nb::str(stream).c_str() +
                             " is not a CUDA stream: -1 (no synchronization), 1 (legacy default), 2 (per-thread "
                             "default) or a stream's handle; 0 is ambiguous")
                                .c_str());
    }
  }
  if (to_host) {
    HostArray copied = allocate_host_array(host_.dtype, host_.dims);
    program_->read(name_, copied.data);
    return export_dlpack(copied, versioned);
  }
  if (device_memory) {
    runtime::DeviceMemory memory = program_->device_memory(name_);
    Result<dlpack::Placement> placement = dlpack::placement(memory.native, memory.offset);
    if (!placement.ok()) throw nb::buffer_error((what + ": " + placement.status().message()).c_str());
    HostArray array = host_;
    array.keep_alive = std::move(memory.keep_alive);
    return export_dlpack(array, versioned, *placement);
  }
  if (copying != true) return export_dlpack(host_, versioned);
  HostArray copied = allocate_host_array(host_.dtype, host_.dims);
  if (host_.bytes() > 0) std::memcpy(copied.data, host_.data, host_.bytes());
  return export_dlpack(copied, versioned);
}

nb::tuple Tensor::dlpack_device() const { return nb::make_tuple(dl_device_.device_type, dl_device_.device_id); }

}  // namespace kiln::python
