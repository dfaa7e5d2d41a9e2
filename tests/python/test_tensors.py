"""kiln.Tensor: zero-copy views of a compiled program's tensors, DLPack both ways."""

import ctypes
import ctypes.util
import gc

import kiln
import numpy as np
import pytest
from conftest import AFFINE


def test_tensor_describes_itself(device):
    run = kiln.Program.from_text(AFFINE).compile(device=device)
    t = run.tensor("y")
    assert t.name == "y" and t.shape == (4, 10) and t.dtype == np.float32 and t.device == device
    np.testing.assert_array_equal(t.numpy(), np.zeros((4, 10), np.float32))


def test_numpy_view_writes_are_read_by_kiln(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    w = np.from_dlpack(run.tensor("w"))
    w[0] = 5  # through the view, straight into the device's array
    y = run(x=np.ones((4, 10), np.float32))["y"]
    assert y[0, 0] == 6 and y[0, 1] == 2
    assert run.get("w")[0] == 5
    w[1] = 7  # a later write through the same view is read too
    assert run.get("w")[1] == 7


def test_kiln_writes_are_seen_through_the_view(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    w = run.tensor("w").numpy()
    y = np.from_dlpack(run.tensor("y"))
    before = w.__array_interface__["data"][0]
    run("double_w")
    np.testing.assert_array_equal(w, np.full(10, 2, np.float32))
    run(x=np.ones((4, 10), np.float32))
    np.testing.assert_array_equal(y, np.full((4, 10), 3, np.float32))
    run.set("w", np.zeros(10, np.float32))  # a host write reaches the view at once
    np.testing.assert_array_equal(w, np.zeros(10, np.float32))
    assert w.__array_interface__["data"][0] == before


def test_view_outlives_the_compiled_program(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    run("double_w")
    w = run.tensor("w").numpy()
    del run
    gc.collect()
    np.testing.assert_array_equal(w, np.full(10, 2, np.float32))


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


def _dl_tensor(capsule):
    """The DLTensor inside a (not consumed) dltensor_versioned capsule."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _DLManagedTensorVersioned.from_address(get(capsule, b"dltensor_versioned")).dl_tensor


class _OpenCL:
    """The few OpenCL calls a consumer of a kDLOpenCL capsule makes, through the ICD loader."""

    def __init__(self):
        self.cl = ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
        self.cl.clCreateCommandQueue.restype = ctypes.c_void_p
        self.cl.clCreateCommandQueue.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                                 ctypes.POINTER(ctypes.c_int32)]
        for name in ("clGetMemObjectInfo", "clGetContextInfo"):
            getattr(self.cl, name).argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p,
                                               ctypes.c_void_p]
        for name in ("clEnqueueReadBuffer", "clEnqueueWriteBuffer"):
            getattr(self.cl, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t,
                                               ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                               ctypes.c_void_p]
        self.cl.clReleaseCommandQueue.argtypes = [ctypes.c_void_p]

    def queue_for(self, mem):
        """A queue on the cl_mem's own context and device."""
        context, device = ctypes.c_void_p(), ctypes.c_void_p()
        assert self.cl.clGetMemObjectInfo(mem, 0x1106, ctypes.sizeof(context), ctypes.byref(context), None) == 0
        assert self.cl.clGetContextInfo(context, 0x1081, ctypes.sizeof(device), ctypes.byref(device), None) == 0
        err = ctypes.c_int32()
        queue = self.cl.clCreateCommandQueue(context, device, 0, ctypes.byref(err))
        assert err.value == 0
        return queue

    def read(self, queue, mem, offset, out):
        assert self.cl.clEnqueueReadBuffer(queue, mem, 1, offset, out.nbytes, out.ctypes.data, 0, None, None) == 0

    def write(self, queue, mem, offset, values):
        assert self.cl.clEnqueueWriteBuffer(queue, mem, 1, offset, values.nbytes, values.ctypes.data, 0, None,
                                            None) == 0


def test_opencl_tensors_export_their_device_memory():
    if "opencl" not in kiln.devices():
        pytest.skip("no OpenCL device")
    run = kiln.Program.from_text(AFFINE).compile(device="opencl")
    run("double_w")
    t = run.tensor("w")
    assert t.__dlpack_device__() == (4, 0)  # kDLOpenCL, kiln's ordinal of the device
    np.testing.assert_array_equal(t.numpy(), np.full(10, 2, np.float32))  # a host copy
    # A consumer of host memory asks for it: a host copy (NumPy alone refuses OpenCL memory).
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), np.full(10, 2, np.float32))
    with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):
        np.from_dlpack(t)
    with pytest.raises(BufferError, match="a host array of it is a copy, which copy=False refuses"):
        t.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="not within the device"):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"exports there or to the host .*, not to \(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError, match="stream must be None for OpenCL device memory"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="OpenCL device memory; kiln imports host memory only"):
        kiln.from_dlpack(t)

    # The capsule itself: the cl_mem (dlpack.h), which a consumer reads on a queue of its own.
    capsule = t.__dlpack__(max_version=(1, 0))
    dl = _dl_tensor(capsule)
    assert (dl.device_type, dl.device_id, dl.ndim, dl.shape[0]) == (4, 0, 1, 10)
    assert (dl.code, dl.bits, dl.lanes) == (2, 32, 1) and not dl.strides
    opencl = _OpenCL()
    queue = opencl.queue_for(dl.data)
    seen = np.zeros(10, np.float32)
    opencl.read(queue, dl.data, dl.byte_offset, seen)
    np.testing.assert_array_equal(seen, np.full(10, 2, np.float32))
    # The consumer's write (finished before kiln runs again) is what kiln's routines read.
    opencl.write(queue, dl.data, dl.byte_offset, np.arange(10, dtype=np.float32))
    opencl.cl.clReleaseCommandQueue(queue)
    run("double_w")
    np.testing.assert_array_equal(run.get("w"), np.arange(10, dtype=np.float32) * 2)


def test_host_tensors_take_no_stream_and_stay_on_the_host(host_device):
    t = kiln.Program.from_text(AFFINE).compile(device=host_device).tensor("w")
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(ValueError, match="stream must be None for host memory"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match=r"host memory of '.*' \(1, 0\); it exports there, not to \(4, 0\)"):
        t.__dlpack__(dl_device=(4, 0))
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu", copy=False), np.ones(10, np.float32))


def test_from_dlpack_is_zero_copy_both_ways():
    a = np.zeros((2, 3), np.float32)
    t = kiln.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype == np.float32 and t.device == "host"
    a[1, 2] = 4  # the producer's write is seen by kiln's tensor
    assert t.numpy()[1, 2] == 4
    t.numpy()[0, 0] = 9  # and kiln's side writes the producer's memory
    assert a[0, 0] == 9
    b = np.from_dlpack(t)  # re-exported: still the same memory
    b[0, 1] = 5
    assert a[0, 1] == 5


def test_from_dlpack_tensor_as_an_input():
    run = kiln.Program.from_text(AFFINE).compile()
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    np.testing.assert_array_equal(run(x=kiln.from_dlpack(x))["y"], x + 1)
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got kiln.Tensor float32\[10\]"):
        run(x=kiln.from_dlpack(np.ones(10, np.float32)))


def test_from_dlpack_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="not contiguous"):
        kiln.from_dlpack(np.zeros((3, 4), np.float32).T)
    with pytest.raises(ValueError, match=r"DLPack dtype complex128 \(DLPack code 5, 128 bits, 1 lane\) is no kiln "
                                         r"element type \(bool, int8, .*, float64\)"):
        kiln.from_dlpack(np.zeros(3, np.complex128))
    with pytest.raises(TypeError, match="has no __dlpack__"):
        kiln.from_dlpack([1, 2, 3])


def test_from_dlpack_empty_array():
    # No element, so row-major whatever its strides (NumPy's are zeros); a sized run takes it.
    t = kiln.from_dlpack(np.empty((0, 3), np.float32))
    assert t.shape == (0, 3) and t.numpy().shape == (0, 3)
    run = kiln.Program.from_text("size N\ninput x : f32[N, 3]\noutput y : f32[N, 3]\ny[i, j] = x[i, j] * 2\n"
                                 ).compile()
    assert run(x=t)["y"].shape == (0, 3)


def test_capsule_consumed_twice():
    capsule = np.ones(3, np.float32).__dlpack__()
    t = kiln.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="consumed already"):
        kiln.from_dlpack(capsule)


class _GpuArray:
    """A producer that says its memory is on a CUDA device."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("kiln must not ask a device array for its capsule")


def test_unsupported_dlpack_device():
    with pytest.raises(BufferError, match="CUDA device memory"):
        kiln.from_dlpack(_GpuArray())


def test_read_only_producer_gives_read_only_view():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = kiln.from_dlpack(a)
    view = t.numpy()
    assert not view.flags.writeable
    np.testing.assert_array_equal(view, a)


def test_capsules_free_their_memory_once():
    # Unconsumed capsules and consumed ones both release what they hold (no leak, no double free).
    run = kiln.Program.from_text(AFFINE).compile()
    t = run.tensor("w")
    for _ in range(1000):
        t.__dlpack__()
        np.from_dlpack(t)
        t.__dlpack__(max_version=(1, 0))
    copy = np.from_dlpack(t, copy=True)
    copy[0] = 42
    assert run.get("w")[0] == 1


CHAIN = """
input x : f32[16, 16]
tensor a : f32[16, 16]
tensor b : f32[16, 16]
tensor c : f32[16, 16]
output y : f32[16]
a[i, j] = x[i, j] * 2
b[i, j] = a[j, i] + a[i, j]
c[i, j] = b[j, i] - b[i, j]
y[i] = sum(c[j, i] * c[i, j])
"""


def test_an_intermediate_in_a_shared_buffer_is_refused_not_read(host_device):
    """a, b and c share their routine's buffer (docs/language.md): a view of one would show
    another's values, so asking for one is an error that says why; the output is right."""
    run = kiln.Program.from_text(CHAIN).compile(device=host_device)
    x = np.arange(256, dtype=np.float32).reshape(16, 16) / 64
    a = x * 2
    b = a.T + a
    c = b.T - b
    np.testing.assert_allclose(run(x=x)["y"], (c.T * c).sum(axis=1), rtol=1e-5)
    with pytest.raises((ValueError, kiln.Error), match="shared buffer"):
        run.tensor("a")
