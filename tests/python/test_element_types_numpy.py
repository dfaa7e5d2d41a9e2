"""Every element type computed by kiln against NumPy (and ml_dtypes for bf16) as the reference,
where the two define the same result (docs/language.md, "Version 3: element types"): integer
arithmetic that wraps at its width, bitwise operations and shifts by amounts below the width,
comparisons giving bool, sums of narrow integers accumulated in 64 bits, conversions to floats,
and f16/bf16 products, which both compute in f32 and round once to nearest even.

Division (kiln truncates toward zero where NumPy floors), shifts past the width and casts of
out-of-range floats, where NumPy's results are its own or undefined, are checked against kiln's
rules by tests/runtime/element_types_test.cc instead.
"""

import kiln
import numpy as np
import pytest
from conftest import HOST_MEMORY_DEVICES

ml_dtypes = pytest.importorskip("ml_dtypes", reason="python/requirements.txt pins ml_dtypes for bf16")

N = 64
INTEGERS = [("i8", np.int8), ("u8", np.uint8), ("i16", np.int16), ("u16", np.uint16), ("i32", np.int32),
            ("u32", np.uint32), ("i64", np.int64), ("u64", np.uint64)]


def whole_range(rng, dtype, shape):
    """Values across the whole range of an integer dtype, its limits included."""
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    v.flat[:4] = [info.min, info.max, 0, info.max // 2 + 1]
    return v


@pytest.mark.parametrize("device", HOST_MEMORY_DEVICES)
@pytest.mark.parametrize("kiln_type, dtype", INTEGERS, ids=[t for t, _ in INTEGERS])
def test_integers_agree_with_numpy(device, kiln_type, dtype):
    bits = np.iinfo(dtype).bits
    wide = "u64" if kiln_type.startswith("u") else "i64"
    program = kiln.Program.from_text(f"""
input a : {kiln_type}[{N}]
input b : {kiln_type}[{N}]
input s : {kiln_type}[{N}]
input m : {kiln_type}[8, 8]
output add : {kiln_type}[{N}]
output sub : {kiln_type}[{N}]
output mul : {kiln_type}[{N}]
output both : {kiln_type}[{N}]
output either : {kiln_type}[{N}]
output differ : {kiln_type}[{N}]
output flipped : {kiln_type}[{N}]
output left : {kiln_type}[{N}]
output right : {kiln_type}[{N}]
output less : bool[{N}]
output larger : {kiln_type}[{N}]
output as_f32 : f32[{N}]
output as_f64 : f64[{N}]
output rows : {wide}[8]
add[i] = a[i] + b[i]
sub[i] = a[i] - b[i]
mul[i] = a[i] * b[i]
both[i] = a[i] & b[i]
either[i] = a[i] | b[i]
differ[i] = a[i] ^ b[i]
flipped[i] = ~a[i]
left[i] = a[i] << s[i]
right[i] = a[i] >> s[i]
less[i] = a[i] < b[i]
larger[i] = max(a[i], b[i])
as_f32[i] = f32(a[i])
as_f64[i] = f64(a[i])
rows[r] = sum(m[r, c])
""")
    run = program.compile(device=device)
    rng = np.random.default_rng(bits)
    a, b, m = whole_range(rng, dtype, N), whole_range(rng, dtype, N), whole_range(rng, dtype, (8, 8))
    s = rng.integers(0, bits, N).astype(dtype)  # shift amounts below the width
    got = run(a=a, b=b, s=s, m=m)
    with np.errstate(over="ignore"):
        want = {
            "add": a + b, "sub": a - b, "mul": a * b, "both": a & b, "either": a | b, "differ": a ^ b,
            "flipped": ~a, "left": np.left_shift(a, s), "right": np.right_shift(a, s), "less": a < b,
            "larger": np.maximum(a, b), "as_f32": a.astype(np.float32), "as_f64": a.astype(np.float64),
            # NumPy sums narrow integers in the platform's 64-bit integer of their signedness.
            "rows": m.sum(axis=1, dtype=np.uint64 if wide == "u64" else np.int64),
        }
    for name, w in want.items():
        assert got[name].dtype == w.dtype, name
        np.testing.assert_array_equal(got[name], w, err_msg=f"{kiln_type} {name} on {device}")


NARROW = [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)]


@pytest.mark.parametrize("device", HOST_MEMORY_DEVICES)
@pytest.mark.parametrize("kiln_type, dtype", NARROW, ids=[t for t, _ in NARROW])
def test_narrow_floats_agree_with_numpy(device, kiln_type, dtype):
    program = kiln.Program.from_text(f"""
input a : {kiln_type}[{N}]
input b : {kiln_type}[{N}]
input x : f32[{N}]
input w : f64[{N}]
output product : {kiln_type}[{N}]
output rounded : {kiln_type}[{N}]
output rounded64 : {kiln_type}[{N}]
output wide : f32[{N}]
output less : bool[{N}]
product[i] = a[i] * b[i]
rounded[i] = {kiln_type}(x[i])
rounded64[i] = w[i]
wide[i] = f32(a[i])
less[i] = a[i] < b[i]
""")
    run = program.compile(device=device)
    rng = np.random.default_rng(16)
    # Magnitudes from subnormal to overflowing products, both signs; halfway cases among the f32s.
    scale = 2.0 ** rng.integers(-20, 12, N)
    a = (rng.standard_normal(N) * scale).astype(dtype)
    b = (rng.standard_normal(N) * scale[::-1]).astype(dtype)
    x = (rng.standard_normal(N) * 2.0 ** rng.integers(-30, 20, N)).astype(np.float32)
    x[:4] = [65520.0, 1 + 2.0**-11, 1 + 3 * 2.0**-11, np.float32(1 + 2.0**-8)]  # ties of f16 and bf16
    w = rng.standard_normal(N) * 2.0 ** rng.integers(-30, 20, N)
    got = run(a=a, b=b, x=x, w=w)
    # The exact product of two f16 (bf16) values fits in f32: NumPy's f32 product rounded once is
    # the correctly rounded one, which kiln computes too.
    with np.errstate(over="ignore"):
        want = {
            "product": (a.astype(np.float32) * b.astype(np.float32)).astype(dtype),
            "rounded": x.astype(dtype),
            "rounded64": w.astype(dtype),
            "wide": a.astype(np.float32),
            "less": a < b,
        }
    for name, v in want.items():
        g = got[name]
        assert g.dtype == v.dtype, name
        if v.dtype == np.bool_:
            np.testing.assert_array_equal(g, v, err_msg=name)
        else:
            bits = np.uint16 if v.dtype.itemsize == 2 else np.uint32
            np.testing.assert_array_equal(g.view(bits), v.view(bits), err_msg=f"{kiln_type} {name} on {device}")
