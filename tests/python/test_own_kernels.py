"""A framework's own kernels from Python (Backend.compile_kernels): run between kiln's routines,
adding another stream's array through the merge buffer, and the errors of describing them."""

import kiln
import numpy as np
import pytest

N = 16

PROGRAM = """\
input  x : f32[16]
param  a : f32[16]
param  b : f32[16]
output y : f32[16]
routine before {
  a[i] = x[i] * 2
}
routine after {
  y[i] = b[i] + x[i]
}
"""

# reverse_scale: b[i] = a[n - 1 - i] * constant 0, one workgroup per element. add_merge:
# b[i] += (b's merge copy)[i], one workgroup.
C_KERNELS = """
int reverse_scale(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  const float* a = (const float*)s->bindings[0];
  float* b = (float*)s->bindings[1];
  uint32_t n = (uint32_t)(s->binding_lengths[1] / sizeof(float));
  b[id->x] = a[n - 1 - id->x] * (float)s->constants[0];
  return 0;
}
int add_merge(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  float* b = (float*)s->bindings[0];
  const float* merged = (const float*)s->bindings[1];
  for (uint64_t i = 0; i < s->binding_lengths[0] / sizeof(float); ++i) b[i] += merged[i];
  return 0;
}
"""

OPENCL_KERNELS = """
__kernel void reverse_scale(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                            KILN_CONSTANT_PARAM(0)) {
  KILN_ENTRY();
  const __global float* a = KILN_BINDING(const float, 0);
  __global float* b = KILN_BINDING(float, 1);
  uint n = (uint)(KILN_BINDING_LENGTH(1) / sizeof(float));
  uint i = (uint)get_group_id(0);
  b[i] = a[n - 1 - i] * (float)KILN_CONSTANT(0);
}
__kernel void add_merge(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1)) {
  KILN_ENTRY();
  __global float* b = KILN_BINDING(float, 0);
  const __global float* merged = KILN_BINDING(const float, 1);
  for (ulong i = 0; i < KILN_BINDING_LENGTH(0) / sizeof(float); ++i) b[i] += merged[i];
}
"""

# The devices that build own kernels, with the format and source of each.
KERNEL_DEVICES = [d for d in ("cpu", "opencl") if d in kiln.devices()]
SOURCES = {"cpu": ("c", C_KERNELS), "opencl": ("opencl-c", OPENCL_KERNELS)}

EXPORTS = [kiln.KernelExport("reverse_scale", bindings=2, constants=1), kiln.KernelExport("add_merge", bindings=2)]


def routines(scale=3):
    return {
        "reverse": [
            kiln.KernelDispatch(
                "reverse_scale",
                [kiln.KernelBinding("a", "float32", (N,)), kiln.KernelBinding("b", np.float32, (N,), access="write")],
                workgroups=N,
                constants=[scale],
            )
        ],
        "merge_b": [
            kiln.KernelDispatch(
                "add_merge",
                [
                    kiln.KernelBinding("b", "float32", (N,), access="readwrite"),
                    kiln.KernelBinding("b", "float32", (N,), merge=True),
                ],
            )
        ],
    }


def compile_kernels(backend, prog, device, **changes):
    fmt, source = SOURCES[device]
    args = dict(source=source, format=fmt, exports=EXPORTS, routines=routines(), label="framework_kernels")
    args.update(changes)
    return backend.compile_kernels(prog, **args)


@pytest.fixture(params=KERNEL_DEVICES)
def kernel_device(request):
    return request.param


def stream_with_kernels(backend, prog, code, kernels):
    """A stream with kiln's routines linked, and the kernels linked under them."""
    tensors = kiln.Tensors(prog)
    generated = backend.context(backend.new_stream(), tensors).link(code)
    return tensors, generated, generated.link(kernels)


def test_a_kernel_between_kiln_routines(kernel_device):
    prog = kiln.Program.from_text(PROGRAM)
    backend = kiln.Backend(kernel_device)
    code = backend.compile(prog, ["before", "after"])
    kernels = compile_kernels(backend, prog, kernel_device)
    assert kernels.routines == ["reverse", "merge_b"]
    tensors, generated, own = stream_with_kernels(backend, prog, code, kernels)
    reverse = own.routine("reverse")
    assert (reverse.reads, reverse.writes) == (["a"], ["b"])
    for start in (1.0, -20.0):
        x = np.arange(N, dtype=np.float32) * 1.5 + start
        tensors.set("x", x)
        generated.routine("before").run()
        reverse.run()
        generated.routine("after").run()
        np.testing.assert_array_equal(tensors.get("y"), x[::-1] * 2 * 3 + x)
    backend.wait()


@pytest.mark.parametrize("merge", ["copy", "streaming"])
def test_a_kernel_adds_another_streams_array_from_the_merge_buffer(kernel_device, merge):
    prog = kiln.Program.from_text(PROGRAM)
    backend = kiln.Backend(kernel_device)
    code = backend.compile(prog, ["before", "after"])
    kernels = compile_kernels(backend, prog, kernel_device)
    (t0, g0, k0), (t1, g1, k1) = [stream_with_kernels(backend, prog, code, kernels) for _ in range(2)]
    merge_b = k0.routine("merge_b")
    assert merge_b.reads == ["b"]  # the merge buffer is not a node's array
    with pytest.raises(kiln.Error, match="FAILED_PRECONDITION: .*reads b.merge, but the merge buffer"):
        merge_b.run()
    x0 = np.arange(N, dtype=np.float32)
    x1 = np.full(N, 10, np.float32) - np.arange(N, dtype=np.float32)
    b0 = np.full(N, 0.5, np.float32)
    t0.set("b", b0)
    t1.set("x", x1)
    g1.routine("before").run()
    k1.routine("reverse").run()
    kiln.device_to_device("b", k0, k1, merge=merge)
    merge_b.run()
    np.testing.assert_array_equal(t0.get("b"), b0 + x1[::-1] * 6)
    # The kernel's b is what kiln's `after` reads next, on the same stream.
    t0.set("x", x0)
    g0.routine("after").run()
    np.testing.assert_array_equal(t0.get("y"), b0 + x1[::-1] * 6 + x0)
    backend.wait()


def describe(**changes):
    """routines() with one dispatch's pieces replaced."""
    r = routines()
    d = r["reverse"][0]
    bindings = changes.pop("bindings", d.bindings)
    r["reverse"] = [kiln.KernelDispatch(changes.pop("kernel", d.kernel), bindings, **changes)]
    return r


def test_description_errors():
    prog = kiln.Program.from_text(PROGRAM)
    backend = kiln.Backend("cpu")
    good = [kiln.KernelBinding("a", "float32", (N,)), kiln.KernelBinding("b", "float32", (N,), access="write")]

    def refused(error, match, **changes):
        with pytest.raises(error, match=match):
            compile_kernels(backend, prog, "cpu", **changes)

    refused(ValueError, "routine 'reverse', dispatch 0 .* binds node 'nowhere', which the program does not declare",
            routines=describe(bindings=[good[0], kiln.KernelBinding("nowhere", "float32", (N,))], constants=[3]))
    refused(ValueError, r"binds node 'a' as f32\[4, 4\], but the program declares it f32\[16\]",
            routines=describe(bindings=[kiln.KernelBinding("a", "float32", (4, 4)), good[1]], constants=[3]))
    refused(ValueError, r"binds node 'a' as i32\[16\]",
            routines=describe(bindings=[kiln.KernelBinding("a", "int32", (N,)), good[1]], constants=[3]))
    refused(ValueError, "'framework_kernels' does not export a kernel named 'nope'",
            routines=describe(kernel="nope", bindings=good, constants=[3]))
    refused(ValueError, "binds 1 nodes, but the export takes 2", routines=describe(bindings=good[:1], constants=[3]))
    refused(ValueError, "passes 0 push constants, but the export takes 1", routines=describe(bindings=good))
    refused(ValueError, "workgroup count of 0", routines=describe(bindings=good, constants=[3], workgroups=(4, 0)))
    refused(ValueError, "merge buffer of 'b' for writing; a merge buffer is read only",
            routines={"m": [kiln.KernelDispatch("add_merge", [good[1], kiln.KernelBinding(
                "b", "float32", (N,), access="readwrite", merge=True)])]})
    refused(TypeError, "routine 'reverse': expects a list of kiln.KernelDispatch, got str", routines={"reverse": "x"})
    refused(TypeError, "routine names must be str, got int", routines={1: []})
    # What the device says: another format, a source that does not compile.
    refused(kiln.Error, "UNIMPLEMENTED: .*'framework_kernels'.*format 'opencl-c'", format="opencl-c")
    refused(kiln.Error, "INVALID_ARGUMENT: compiling the kernels of 'framework_kernels' for device 'cpu",
            source="int this is not C;")

    # The pieces check what they can alone.
    with pytest.raises(ValueError, match='access must be "read", "write" or "readwrite", not "rw"'):
        kiln.KernelBinding("b", "float32", (N,), access="rw")
    with pytest.raises(ValueError, match="dtype complex64 is none of bool, int8, .*, float32, float64"):
        kiln.KernelBinding("b", np.complex64, (N,))
    with pytest.raises(ValueError, match="workgroup count has 4 dimensions"):
        kiln.KernelDispatch("k", [], workgroups=(1, 1, 1, 1))
    with pytest.raises(ValueError, match="push constant 0 -1 is not an unsigned 32-bit value"):
        kiln.KernelDispatch("k", [], constants=[-1])


def test_a_device_that_builds_neither_format():
    if "interp" not in kiln.devices():
        pytest.skip("no interp device")
    prog = kiln.Program.from_text(PROGRAM)
    with pytest.raises(kiln.Error, match="UNIMPLEMENTED: compiling the kernels of 'framework_kernels' for device"):
        compile_kernels(kiln.Backend("interp"), prog, "cpu")
