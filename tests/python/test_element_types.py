"""Every element type (language version 3) through the Python package: NumPy arrays in and out of
run(), set(), get(), tensor() and kiln.Tensors, sized tensors, DLPack with NumPy, bf16 as
ml_dtypes.bfloat16 (and as uint16 bit patterns without ml_dtypes), and the errors for arrays of
other types (docs/python.md, "Element types").

The programs only copy (y[i] = x[i]): what is tested is the transfer of each type's bytes, on
every device (the values computed on each type are tests/runtime/element_types_test.cc's).
"""

import os
import subprocess
import sys
import textwrap

import kiln
import numpy as np
import pytest
from conftest import DEVICES, HOST_MEMORY_DEVICES

ml_dtypes = pytest.importorskip("ml_dtypes", reason="python/requirements.txt pins ml_dtypes for bf16")
bfloat16 = ml_dtypes.bfloat16

# kiln's type, NumPy's dtype, and values at the type's edges.
TYPES = [
    ("bool", np.bool_, [True, False, True, True, False]),
    ("i8", np.int8, [-128, 127, 0, -1, 1]),
    ("u8", np.uint8, [0, 255, 128, 1, 127]),
    ("i16", np.int16, [-32768, 32767, 0, -1, 1]),
    ("u16", np.uint16, [0, 65535, 32768, 1, 255]),
    ("i32", np.int32, [-2**31, 2**31 - 1, 0, -1, 1]),
    ("u32", np.uint32, [0, 2**32 - 1, 2**31, 1, 255]),
    ("i64", np.int64, [-2**63, 2**63 - 1, 0, -1, 2**53 + 1]),
    ("u64", np.uint64, [0, 2**64 - 1, 2**63, 1, 2**53 + 1]),
    # f16: the largest finite, infinities, NaN, the smallest subnormal and the largest one, -0.
    ("f16", np.float16, [65504, -np.inf, np.nan, 2.0**-24, -0.0]),
    ("bf16", bfloat16, [3.3895313892515355e38, np.inf, np.nan, 9.183549615799121e-41, -0.0]),
    ("f32", np.float32, [3.4028235e38, -np.inf, np.nan, 1e-45, -0.0]),
    ("f64", np.float64, [1.7976931348623157e308, np.inf, np.nan, 5e-324, -0.0]),
]
IDS = [t[0] for t in TYPES]


def copy_program(kiln_type, n=5):
    return kiln.Program.from_text(f"input x : {kiln_type}[{n}]\noutput y : {kiln_type}[{n}]\ny[i] = x[i]\n")


def assert_same(got, want):
    """Equal dtype, and every element equal bit for bit (a NaN is any NaN: devices may quiet it)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind == "f" or want.dtype == bfloat16:
        nan = np.isnan(want.astype(np.float64))
        assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
        np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])  # -0.0 included
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kiln_type, dtype, values", TYPES, ids=IDS)
def test_every_type_round_trips_through_run_set_get_and_tensor(device, kiln_type, dtype, values):
    x = np.array(values, dtype)
    run = copy_program(kiln_type).compile(device=device)
    assert run.tensor("x").dtype == np.dtype(dtype)
    assert_same(run(x=x)["y"], x)
    assert_same(run.get("y"), x)
    assert_same(run.get("x"), x)
    assert_same(run.tensor("y").numpy(), x)
    # set() and the next run, with the values reversed; Python lists too.
    run.set("x", x[::-1])  # a strided array: copied in order
    assert_same(run()["y"], x[::-1])
    assert_same(run(x=list(x))["y"], x)


@pytest.mark.parametrize("kiln_type, dtype, values", TYPES, ids=IDS)
def test_every_type_binds_host_arrays_without_a_copy(host_device, kiln_type, dtype, values):
    x = np.array(values, dtype)
    run = copy_program(kiln_type).compile(device=host_device)
    run(x=x)
    view = run.tensor("x").numpy()
    assert view.__array_interface__["data"][0] == x.__array_interface__["data"][0]
    assert view.dtype == np.dtype(dtype)
    y = run.tensor("y")
    if dtype is not bfloat16:  # NumPy imports no bfloat16 through DLPack
        assert np.from_dlpack(y).__array_interface__["data"][0] == y.numpy().__array_interface__["data"][0]


@pytest.mark.parametrize("kiln_type, dtype, values", TYPES, ids=IDS)
def test_every_type_with_sizes_and_the_runtime_api(kiln_type, dtype, values):
    x = np.array(values, dtype)
    prog = kiln.Program.from_text(f"size N\ninput x : {kiln_type}[N]\noutput y : {kiln_type}[N]\ny[i] = x[i]\n")
    assert prog.tensors["x"] == ("input", np.dtype(dtype).name, ("N",))
    run = prog.compile(device="interp")
    assert_same(run(x=x[:3])["y"], x[:3])
    assert_same(run(x=x)["y"], x)
    assert_same(run(x=x[:0])["y"], x[:0])
    tensors = kiln.Tensors(prog)
    tensors.set("x", x)
    assert_same(tensors.get("x"), x)


@pytest.mark.parametrize("kiln_type, dtype, values", TYPES, ids=IDS)
def test_from_dlpack_of_every_type_is_the_same_memory(kiln_type, dtype, values):
    x = np.array(values, dtype)
    t = kiln.from_dlpack(x)  # a bfloat16 array through its uint16 view: NumPy cannot export it
    assert t.dtype == np.dtype(dtype) and t.shape == (5,)
    assert t.numpy().__array_interface__["data"][0] == x.__array_interface__["data"][0]
    run = copy_program(kiln_type).compile(device="interp")
    assert_same(run(x=t)["y"], x)


def test_f16_and_bf16_lists_round_to_nearest_even():
    run = copy_program("f16", 4).compile(device="interp")
    # 1 + 2^-11 is halfway between 1 and the next f16: even is 1; 65520 rounds up to inf.
    np.testing.assert_array_equal(run(x=[1 + 2**-11, 1 + 3 * 2**-11, 65520, 1e-8])["y"],
                                  np.array([1, 1 + 2**-9, np.inf, 0], np.float16))
    run = copy_program("bf16", 4).compile(device="interp")
    y = run(x=[1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 1.5])["y"]
    assert y.dtype == bfloat16
    np.testing.assert_array_equal(y.astype(np.float64), [1, 1 + 2**-6, np.inf, 1.5])


def test_bf16_takes_uint16_bit_patterns():
    run = copy_program("bf16", 3).compile(device="interp")
    bits = np.array([0x3F80, 0xC000, 0x7F80], np.uint16)  # 1, -2, inf
    y = run(x=bits)["y"]
    assert y.dtype == bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [1, -2, np.inf])
    np.testing.assert_array_equal(y.view(np.uint16), bits)


@pytest.mark.parametrize("kiln_type, value", [("u8", [1, 256]), ("i8", [-129, 0]), ("u64", [-1, 0]),
                                              ("u64", [2**64, 0]), ("i64", [2**63, 0]), ("i32", [1.5, 0]),
                                              ("i32", [float("nan"), 0]), ("bool", [2, 0]), ("u16", 65536)])
def test_numbers_that_are_no_value_of_an_integer_type_are_refused(kiln_type, value):
    run = kiln.Program.from_text(f"input x : {kiln_type}[2]\n").compile(device="interp")
    name = np.dtype(dict((t[0], t[1]) for t in TYPES)[kiln_type]).name
    with pytest.raises(ValueError, match=rf"tensor 'x': the value is no {name} value \(a number out of its range or "
                                         "not whole"):
        run.set("x", value)
    run.set("x", [1, True])  # whole numbers in range are taken
    assert run.get("x").tolist() == [1, 1]


def test_numbers_convert_to_integer_types_exactly():
    run = kiln.Program.from_text("input x : u64[3]\ninput z : i64[3]\n").compile(device="interp")
    run.set("x", [2**64 - 1, 2**53 + 1, 2.0])  # beyond float64's integers: kept exact
    assert run.get("x").tolist() == [2**64 - 1, 2**53 + 1, 2]
    run.set("z", [-2**63, 2**63 - 1, -(2**53 + 1)])
    assert run.get("z").tolist() == [-2**63, 2**63 - 1, -(2**53 + 1)]


WRONG = [
    # tensor type, the array given, what the message says it got, the conversion it suggests
    ("f32", np.ones(5, np.float64), r"float64\[5\]", r"a\.astype\(numpy\.float32\)"),
    ("bool", np.ones(5, np.uint8), r"uint8\[5\]", r"a\.astype\(numpy\.bool_\)"),
    ("u8", np.ones(5, np.int8), r"int8\[5\]", r"a\.astype\(numpy\.uint8\)"),
    ("u64", np.ones(5, np.int64), r"int64\[5\]", r"a\.astype\(numpy\.uint64\)"),
    ("f16", np.ones(5, bfloat16), r"bfloat16\[5\]", r"a\.astype\(numpy\.float16\)"),
    ("bf16", np.ones(5, np.float16), r"float16\[5\]", r"a\.astype\(ml_dtypes\.bfloat16\)"),
    ("bf16", np.ones(5, np.float32), r"float32\[5\]", r"a\.astype\(ml_dtypes\.bfloat16\)"),
    # No conversion to suggest: astype would drop the imaginary part.
    ("f32", np.ones(5, np.complex64), r"complex64\[5\]", None),
    ("f64", np.ones(5, np.complex128), r"complex128\[5\]", None),
]


@pytest.mark.parametrize("kiln_type, value, got, hint", WRONG, ids=[f"{w[0]}-{w[1].dtype}" for w in WRONG])
def test_an_array_of_another_type_names_the_tensor_and_both_types(kiln_type, value, got, hint):
    run = copy_program(kiln_type).compile(device="interp")
    want = np.dtype(dict((t[0], t[1]) for t in TYPES)[kiln_type]).name
    with pytest.raises(ValueError, match=rf"tensor 'x': expects {want}\[5\], got {got}" +
                                         (rf"; convert it: {hint}$" if hint else "$")):
        run(x=value)
    with pytest.raises(ValueError, match=rf"tensor 'x': expects {want}\[5\], got {got}"):
        run.set("x", value)


def test_arrays_of_types_kiln_has_not_are_refused_by_name():
    run = copy_program("f32").compile(device="interp")
    for value, got in [(np.zeros(5, ml_dtypes.float8_e4m3fn), "float8_e4m3fn"),
                       (np.zeros(5, ml_dtypes.float8_e5m2), "float8_e5m2"),
                       (np.array([None] * 5, object), "object"),
                       (np.array(["a"] * 5), "str32")]:
        with pytest.raises(ValueError, match=rf"tensor 'x': expects float32\[5\], got {got}\[5\]"):
            run(x=value)
    for value, got in [(np.zeros(3, np.complex64), r"complex64 \(DLPack code 5, 64 bits, 1 lane\)"),
                       (np.zeros(3, ml_dtypes.float8_e4m3fn), r"float8_e4m3fn\[3\]")]:
        with pytest.raises(ValueError, match=rf"kiln.from_dlpack: .*{got}.* is no kiln element type \(bool, int8, "
                                             r"uint8, .*, bfloat16, float32, float64\)"):
            kiln.from_dlpack(value)


def test_kernel_bindings_take_every_type():
    for kiln_type, dtype, _ in TYPES:
        assert kiln.KernelBinding("a", dtype, (4,)).dtype == np.dtype(dtype).name
    assert kiln.KernelBinding("a", "bfloat16", (4,)).dtype == "bfloat16"
    with pytest.raises(ValueError, match=r"kernel binding of 'a': dtype complex64 is none of bool, int8, .*, float64"):
        kiln.KernelBinding("a", np.complex64, (4,))


WITHOUT_ML_DTYPES = textwrap.dedent("""
    import sys
    sys.modules["ml_dtypes"] = None  # `import ml_dtypes` raises ImportError, as where it is absent
    import kiln, numpy as np
    run = kiln.Program.from_text("input x : bf16[3]\\noutput y : bf16[3]\\ny[i] = x[i]\\n").compile(device="interp")
    bits = np.array([0x3F80, 0xC000, 0x7FC0], np.uint16)  # 1, -2, NaN
    y = run(x=bits)["y"]
    assert y.dtype == np.uint16 and (y == bits).all(), y
    assert run.tensor("y").dtype == np.uint16 and run.get("y").dtype == np.uint16
    assert run.tensor("y").numpy().dtype == np.uint16
    assert (run(x=[1.0, -2.0, 1 + 2**-8])["y"] == [0x3F80, 0xC000, 0x3F80]).all()
    assert kiln.Program.from_text("input x : bf16[3]\\n").tensors["x"] == ("input", "bfloat16", (3,))
    try:
        run(x=np.ones(3, np.float32))
    except ValueError as e:
        assert "convert it: a.astype(ml_dtypes.bfloat16).view(numpy.uint16)" in str(e), e
    else:
        raise AssertionError("float32 taken for bf16")
    print("ok")
""")


def test_without_ml_dtypes_bf16_is_exchanged_as_uint16_bit_patterns():
    result = subprocess.run([sys.executable, "-c", WITHOUT_ML_DTYPES], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ))
    assert result.returncode == 0 and result.stdout == "ok\n", result.stdout + result.stderr


@pytest.mark.parametrize("kiln_type, dtype, values", TYPES, ids=IDS)
def test_custom_calls_get_arrays_of_every_type(kiln_type, dtype, values):
    seen = []

    def copy_any(x, y):
        seen.append((x.dtype, y.dtype, x.flags.writeable))
        y[...] = x

    name = f"copy_{kiln_type}"
    kiln.register_call(name, copy_any, device="interp")
    run = kiln.Program.from_text(f"input x : {kiln_type}[5]\noutput y : {kiln_type}[5]\ncall {name}(x) -> y\n"
                                 ).compile(device="interp")
    x = np.array(values, dtype)
    assert_same(run(x=x)["y"], x)
    assert seen == [(np.dtype(dtype), np.dtype(dtype), False)]
