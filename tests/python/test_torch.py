"""PyTorch as a peer: tensors exchanged with kiln through DLPack both ways, without copies on the
host, and examples/python/train_moons_torch.py (kiln trains, a torch DataLoader feeds it).

ctest runs this file twice: in python.pytest with the build's virtual environment, which has no
PyTorch (every test here is skipped, saying so), and in python.torch with the interpreter that
environment was made from, where `make test` installs Debian's python3-torch (CPU).
"""

import gc
import os
import re
import subprocess
import sys
from pathlib import Path

import kiln
import numpy as np
import pytest
from conftest import AFFINE

torch = pytest.importorskip(
    "torch", reason="PyTorch is absent from this Python; ctest's python.torch runs these tests with "
                    "Debian's python3-torch")

DTYPES = [(torch.float32, "f32", np.float32), (torch.float64, "f64", np.float64),
          (torch.int32, "i32", np.int32)]


def address(t):
    """Where a kiln.Tensor's memory starts (its NumPy view is the memory itself on the host)."""
    return t.numpy().__array_interface__["data"][0]


@pytest.mark.parametrize("torch_dtype, kiln_type, np_dtype", DTYPES)
def test_torch_views_kiln_tensors(host_device, torch_dtype, kiln_type, np_dtype):
    run = kiln.Program.from_text(
        f"input x : {kiln_type}[3, 4]\noutput y : {kiln_type}[3, 4]\ny[i, j] = x[i, j] + x[i, j]\n"
    ).compile(device=host_device)
    x = np.arange(12, dtype=np_dtype).reshape(3, 4)
    run(x=x)
    t = run.tensor("y")
    y = torch.from_dlpack(t)
    assert y.dtype == torch_dtype and tuple(y.shape) == (3, 4) and y.device.type == "cpu"
    assert y.data_ptr() == address(t)  # the device's array itself, not a copy
    np.testing.assert_array_equal(y.numpy(), 2 * x)
    run(x=x + 1)  # kiln's next write is in the torch tensor
    np.testing.assert_array_equal(y.numpy(), 2 * (x + 1))


# Every type PyTorch and kiln share, with values at its edges.
EVERY_TYPE = [
    (torch.bool, "bool", [True, False, True, False, True, True]),
    (torch.uint8, "u8", [0, 255, 128, 1, 127, 2]),
    (torch.int8, "i8", [-128, 127, 0, -1, 1, 2]),
    (torch.int16, "i16", [-32768, 32767, 0, -1, 1, 2]),
    (torch.int32, "i32", [-2**31, 2**31 - 1, 0, -1, 1, 2]),
    (torch.int64, "i64", [-2**63, 2**63 - 1, 0, -1, 1, 2]),
    (torch.float16, "f16", [65504, -float("inf"), 2.0**-24, -0.0, 1.5, 2]),
    (torch.bfloat16, "bf16", [3.3895313892515355e38, float("inf"), 9.183549615799121e-41, -0.0, 1.5, 2]),
    (torch.float32, "f32", [3.4028235e38, -float("inf"), 1e-45, -0.0, 1.5, 2]),
    (torch.float64, "f64", [1.7976931348623157e308, float("inf"), 5e-324, -0.0, 1.5, 2]),
]


def torch_reads_bool_through_dlpack():
    """PyTorch before 2 has no bool in DLPack (its export says so; its import: 'Unsupported code 6')."""
    try:
        torch.zeros(1, dtype=torch.bool).__dlpack__()
        return True
    except RuntimeError:
        return False


def torch_view(t):
    """A torch tensor over a kiln.Tensor's memory: through DLPack, or for bool where PyTorch reads
    no bool through DLPack, through NumPy's bool view (torch.from_numpy shares memory too)."""
    if t.dtype == np.bool_ and not torch_reads_bool_through_dlpack():
        with pytest.raises(RuntimeError, match="Unsupported code 6"):  # kDLBool, which kiln exports
            torch.from_dlpack(t)
        return torch.from_numpy(t.numpy())
    return torch.from_dlpack(t)


@pytest.mark.parametrize("torch_dtype, kiln_type, values", EVERY_TYPE, ids=[t[1] for t in EVERY_TYPE])
def test_every_type_is_exchanged_both_ways_without_a_copy(host_device, torch_dtype, kiln_type, values):
    run = kiln.Program.from_text(f"input x : {kiln_type}[2, 3]\noutput y : {kiln_type}[2, 3]\ny[i, j] = x[i, j]\n"
                                 ).compile(device=host_device)
    x = torch.tensor(values, dtype=torch_dtype).reshape(2, 3)
    run(x=x)  # torch -> kiln: x is the tensor's array itself
    assert address(run.tensor("x")) == x.data_ptr()
    t = run.tensor("y")
    y = torch_view(t)  # kiln -> torch: the device's array itself
    assert y.dtype == torch_dtype and tuple(y.shape) == (2, 3) and y.data_ptr() == address(t)
    assert torch.equal(y, x) and torch.equal(torch.signbit(y.float()), torch.signbit(x.float()))  # -0.0 too
    x2 = torch.flip(x, [1]).contiguous()
    run(x=x2)  # kiln's next write is in torch's tensor
    assert torch.equal(y, x2)
    imported = kiln.from_dlpack(x2)  # kiln.from_dlpack: the same memory, the same type
    assert address(imported) == x2.data_ptr() and imported.shape == (2, 3)
    assert torch.equal(torch_view(imported), x2) and torch_view(imported).data_ptr() == x2.data_ptr()


def test_torch_writes_are_read_by_kiln(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    w = torch.from_dlpack(run.tensor("w"))
    w.mul_(3)  # an in-place torch op on kiln's parameter
    y = run(x=np.ones((4, 10), np.float32))["y"]
    np.testing.assert_array_equal(y, np.full((4, 10), 4, np.float32))
    run("double_w")  # and kiln's routine writes what torch sees
    assert torch.equal(w, torch.full((10,), 6.0))


def test_torch_view_outlives_the_compiled_program(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    run("double_w")
    w = torch.from_dlpack(run.tensor("w"))
    del run
    gc.collect()
    assert torch.equal(w, torch.full((10,), 2.0))


def test_opencl_memory_is_exported_as_opencl_and_torch_refuses_it():
    if "opencl" not in kiln.devices():
        pytest.skip("no OpenCL device")
    run = kiln.Program.from_text(AFFINE).compile(device="opencl")
    assert run.tensor("w").__dlpack_device__()[0] == 4  # kDLOpenCL: device memory, not the host's
    with pytest.raises(RuntimeError, match="OPENCL"):  # PyTorch takes no OpenCL memory
        torch.from_dlpack(run.tensor("w"))


def test_a_torch_tensor_handed_to_a_run_is_the_tensors_memory(host_device):
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    w = torch.full((10,), 3.0)
    run("double_w", w=w)  # bound, not copied: the routine's write lands in w
    assert torch.equal(w, torch.full((10,), 6.0))
    shared = torch.full((10,), 5.0)
    run("double_w", w=kiln.from_dlpack(shared))
    assert torch.equal(shared, torch.full((10,), 10.0))


@pytest.mark.parametrize("torch_dtype, kiln_type, np_dtype", DTYPES)
def test_kiln_imports_torch_tensors_without_a_copy(torch_dtype, kiln_type, np_dtype):
    a = torch.zeros(2, 3, dtype=torch_dtype)
    t = kiln.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype == np_dtype and t.device == "host"
    assert address(t) == a.data_ptr()
    a[1, 2] = 4  # torch's write is seen by kiln's tensor
    assert t.numpy()[1, 2] == 4
    t.numpy()[0, 0] = 9  # and kiln's side writes torch's memory
    assert a[0, 0] == 9
    back = torch.from_dlpack(t)  # re-exported: still the same memory
    assert back.data_ptr() == a.data_ptr()


def test_imported_tensor_keeps_torch_memory_alive():
    t = kiln.from_dlpack(torch.arange(6, dtype=torch.int32).reshape(2, 3))
    gc.collect()  # the torch tensor has no other owner now
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.int32).reshape(2, 3))


def test_a_row_range_of_a_torch_tensor_is_contiguous():
    base = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    rows = base[1:3]  # an offset into base's memory, row-major
    t = kiln.from_dlpack(rows)
    assert address(t) == rows.data_ptr() != base.data_ptr()
    np.testing.assert_array_equal(t.numpy(), rows.numpy())


def test_empty_torch_tensor():
    # torch exports an empty tensor with strides of ones and no memory (a NULL data pointer).
    t = kiln.from_dlpack(torch.empty(0, 3))
    assert t.shape == (0, 3)
    run = kiln.Program.from_text("size N\ninput x : f32[N, 3]\noutput y : f32[N, 3]\ny[i, j] = x[i, j] * 2\n"
                                 ).compile()
    assert run(x=t)["y"].shape == (0, 3)


def test_kiln_tensor_through_a_torch_op_into_another_run(host_device):
    first = kiln.Program.from_text(AFFINE).compile(device=host_device)
    second = kiln.Program.from_text(
        "input x : f32[4, 10]\noutput y : f32[4, 10]\ny[i, j] = x[i, j] * 10\n").compile(device=host_device)
    x = torch.linspace(-2, 2, 40).reshape(4, 10)
    first(x=kiln.from_dlpack(x))  # y = x + 1, in kiln's memory
    z = torch.relu(torch.from_dlpack(first.tensor("y")) - 1.5)  # a torch op on kiln's array
    out = second(x=kiln.from_dlpack(z))["y"]  # and its result into the next kiln run
    np.testing.assert_allclose(out, 10 * torch.relu(x - 0.5).numpy(), rtol=1e-6)


def test_torch_tensor_set_into_a_parameter():
    run = kiln.Program.from_text(AFFINE).compile()
    run.set("w", kiln.from_dlpack(torch.arange(10, dtype=torch.float32)))
    y = run(x=np.ones((4, 10), np.float32))["y"]
    np.testing.assert_array_equal(y[0], np.arange(10, dtype=np.float32) + 1)


def test_kiln_refuses_what_it_cannot_import():
    with pytest.raises(ValueError, match="not contiguous"):
        kiln.from_dlpack(torch.zeros(3, 4).t())
    with pytest.raises(ValueError, match="not contiguous"):
        kiln.from_dlpack(torch.zeros(3, 4)[:, ::2])
    for dtype, name in [(torch.complex64, "complex64"), (torch.complex128, "complex128")]:
        with pytest.raises(ValueError, match=rf"DLPack dtype {name} \(DLPack code 5, \d+ bits, 1 lane\) "
                                             r"is no kiln element type \(bool, int8, .*, float64\)"):
            kiln.from_dlpack(torch.zeros(3, dtype=dtype))
        # Handed to a run, the message names the tensor and both types.
        run = kiln.Program.from_text(AFFINE).compile()
        with pytest.raises(ValueError, match=rf"tensor 'x': expects float32\[4, 10\], got {name}\[4, 10\]$"):
            run(x=torch.zeros(4, 10, dtype=dtype))
    # A wrong shape for the program's tensor is named like a NumPy array's.
    run = kiln.Program.from_text(AFFINE).compile()
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got kiln.Tensor float32\[10\]"):
        run(x=kiln.from_dlpack(torch.ones(10)))
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got float16\[4, 10\]; "
                                         r"convert it: a\.astype\(numpy\.float32\)"):
        run(x=torch.ones(4, 10, dtype=torch.float16))


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this PyTorch has no float8")
def test_float8_tensors_are_refused_by_name():
    run = kiln.Program.from_text(AFFINE).compile()
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got (torch\.)?float8_e4m3fn\[4, 10\]"):
        run(x=torch.zeros(4, 10, dtype=torch.float8_e4m3fn))
    with pytest.raises(ValueError, match=r"float8_e4m3fn.* is no kiln element type"):
        kiln.from_dlpack(torch.zeros(4, dtype=torch.float8_e4m3fn))


def test_a_tensor_that_requires_grad_is_refused_and_autograd_stays_right(host_device):
    # Binding w and letting double_w write it would leave w's version counter as it was: the
    # backward() below would use the doubled values and return a wrong gradient without a word.
    run = kiln.Program.from_text(AFFINE).compile(device=host_device)
    w = torch.full((10,), 3.0, requires_grad=True)
    loss = (w * w).sum()
    with pytest.raises(ValueError, match=r"tensor 'w': the torch tensor requires grad.*detach\(\) it"):
        run("double_w", w=w)
    with pytest.raises(ValueError, match=r"tensor 'w': the torch tensor requires grad"):
        run.set("w", w)
    with pytest.raises(ValueError, match=r"tensor 'x': the torch tensor requires grad"):
        run(x=torch.ones(4, 10, requires_grad=True))
    tensors = kiln.Tensors(kiln.Program.from_text(AFFINE))
    with pytest.raises(ValueError, match=r"tensor 'w': the torch tensor requires grad"):
        tensors.set("w", w)
    loss.backward()
    assert torch.equal(w.grad, torch.full((10,), 6.0))  # 2 * w, w untouched
    # detach() is the way: the memory is shared, and kiln may write it.
    run("double_w", w=w.detach())
    assert torch.equal(w.detach(), torch.full((10,), 6.0))
    # A tensor computed under no_grad, or an intermediate result, does not require grad.
    with torch.no_grad():
        run("double_w", w=w * 1)


def test_non_contiguous_torch_tensors_are_copied_by_a_run():
    run = kiln.Program.from_text(AFFINE).compile()
    x = torch.arange(40, dtype=torch.float32).reshape(10, 4).t()  # (4, 10), not contiguous
    np.testing.assert_array_equal(run(x=x)["y"], x.numpy() * 1 + 1)


# examples/python/train_moons_torch.py, run as a user would: a subprocess of this interpreter.
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "python" / "train_moons_torch.py"
ACCURACY = re.compile(r"^accuracy on all (\d+) points: (\d+\.\d)%$", re.M)


def test_example_trains_from_a_torch_data_loader():
    result = subprocess.run([sys.executable, str(SCRIPT), "--epochs", "20"], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    found = ACCURACY.search(result.stdout)
    assert found, f"no accuracy line in:\n{result.stdout}"
    assert int(found.group(1)) == 10000 and float(found.group(2)) >= 95.0, result.stdout
