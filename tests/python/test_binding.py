"""Zero-copy in: a host array handed to a run is the tensor's array on cpu and interp.

The binding lasts until the tensor is set again; what kiln cannot use in place (misaligned,
strided, read-only memory, memory another tensor has, OpenCL) is copied and still correct. The
in-flight test orders the routine after the drop with a semaphore the test signals, never a sleep.
"""

import gc
import time
import weakref

import kiln
import numpy as np
import pytest
from conftest import AFFINE

# A param read and written in place, an input read, a const.
SGD = """\
input  g : f32[10]
param  w : f32[10] = 1
output y : f32[10]
routine step {
  w[j] = w[j] - 0.5 * g[j]
}
y[j] = w[j] * 2
"""

G = np.arange(10, dtype=np.float32)


def stepped(w):
    return w - 0.5 * G


def test_a_param_is_updated_in_the_callers_array(host_device):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    w = np.full(10, 3, np.float32)
    run("step", w=w, g=G)
    np.testing.assert_array_equal(w, stepped(np.full(10, 3, np.float32)))
    # The binding lasts: later runs update the same array, and the caller's writes are read.
    run("step")
    np.testing.assert_array_equal(w, stepped(stepped(np.full(10, 3, np.float32))))
    w[:] = 7
    np.testing.assert_array_equal(run()["y"], np.full(10, 14, np.float32))
    np.testing.assert_array_equal(run.get("w"), w)
    # Set again: the new array is bound; the old one keeps what it held.
    old = w.copy()
    w2 = np.zeros(10, np.float32)
    run.set("w", w2)
    run("step")
    np.testing.assert_array_equal(w, old)
    np.testing.assert_array_equal(w2, stepped(np.zeros(10, np.float32)))
    # A list is copied: the tensor has memory of its own again, w2 stays as it is.
    run.set("w", [1.0] * 10)
    run("step")
    np.testing.assert_array_equal(w2, stepped(np.zeros(10, np.float32)))
    np.testing.assert_array_equal(run.get("w"), stepped(np.ones(10, np.float32)))


def test_the_training_idiom_rebinds_each_step(host_device):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    w = np.ones(10, np.float32)
    for _ in range(3):
        w = w - 0.5 * G  # a new array each step, bound by the next run
        run("step", w=w, g=G)
    expected = np.ones(10, np.float32)
    for _ in range(3):
        expected = stepped(stepped(expected))
    np.testing.assert_array_equal(w, expected)


def misaligned(values):
    raw = bytearray(values.nbytes + 1)
    a = np.frombuffer(raw, dtype=values.dtype, count=values.size, offset=1).reshape(values.shape)
    a[...] = values
    assert a.ctypes.data % values.itemsize != 0
    return a


@pytest.mark.parametrize("kind", ["misaligned", "strided", "read-only", "shared with another tensor"])
def test_what_cannot_be_bound_is_copied(host_device, kind):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    w = np.full(10, 3, np.float32)
    g = G.copy()
    if kind == "misaligned":
        w = misaligned(w)
    elif kind == "strided":
        w = np.full(20, 3, np.float32)[::2]
    elif kind == "read-only":
        w.flags.writeable = False
    else:
        both = np.full(10, 3, np.float32)
        run.set("g", both)  # bound as g first
        w, g = both, None
    before = w.copy()
    run("step", w=w) if g is None else run("step", w=w, g=g)
    expected_g = before if g is None else G
    np.testing.assert_array_equal(w, before)  # a copy was updated, not the caller's array
    np.testing.assert_array_equal(run.get("w"), before - 0.5 * expected_g)


def test_device_memory_is_copied_into(device):
    run = kiln.Program.from_text(SGD).compile(device=device)
    w = np.full(10, 3, np.float32)
    run("step", w=w, g=G)
    if device == "opencl":
        np.testing.assert_array_equal(w, np.full(10, 3, np.float32))
    np.testing.assert_array_equal(run.get("w"), stepped(np.full(10, 3, np.float32)))


def test_a_live_view_keeps_the_tensors_memory(host_device):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    view = run.tensor("w").numpy()
    w = np.full(10, 3, np.float32)
    run("step", w=w, g=G)  # copied into the memory the view shows
    np.testing.assert_array_equal(view, stepped(np.full(10, 3, np.float32)))
    np.testing.assert_array_equal(w, np.full(10, 3, np.float32))
    del view
    gc.collect()
    run("step", w=w, g=G)  # no view left: bound
    np.testing.assert_array_equal(w, stepped(np.full(10, 3, np.float32)))
    # A view taken now is the caller's array.
    np.testing.assert_array_equal(run.tensor("w").numpy(), w)
    assert np.from_dlpack(run.tensor("w")).ctypes.data == w.ctypes.data


def test_imported_arrays_are_bound_too(host_device):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    w = np.full(10, 3, np.float32)
    run("step", w=kiln.from_dlpack(w), g=G)
    np.testing.assert_array_equal(w, stepped(np.full(10, 3, np.float32)))


SIZED = """\
size N
input  x : f32[N]
input  a : f32[N]
output y : f32[N]
y[i] = a[i] + x[i]
"""


def test_sized_tensors_bind_at_each_shape(host_device):
    run = kiln.Program.from_text(SIZED).compile(device=host_device)
    a = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(run(x=np.full(3, 10, np.float32), a=a)["y"], [11, 12, 13])
    a[:] = 5  # bound: the caller's write is the next run's input
    np.testing.assert_array_equal(run(x=np.full(3, 10, np.float32))["y"], [15, 15, 15])
    # Another N: a's 3 elements are no longer its array (kiln's own, of zeros, until set).
    np.testing.assert_array_equal(run(x=np.ones(5, np.float32), a=np.ones(5, np.float32))["y"], np.full(5, 2))
    np.testing.assert_array_equal(run(x=np.ones(4, np.float32), a=np.arange(4, dtype=np.float32))["y"], [1, 2, 3, 4])


def test_the_binding_holds_the_array_until_set_again(host_device):
    run = kiln.Program.from_text(SGD).compile(device=host_device)
    w = np.full(10, 3, np.float32)
    held = weakref.ref(w)
    run("step", w=w, g=G)
    del w
    gc.collect()
    assert held() is not None  # kiln holds it while bound
    run("step")  # and it is still the tensor's memory
    np.testing.assert_array_equal(held(), stepped(stepped(np.full(10, 3, np.float32))))
    run.set("w", np.zeros(10, np.float32))
    run.close()
    del run
    assert _released(held)  # released once nothing uses it


def _let_pending_calls_run():
    """A Python call: the interpreter runs pending calls (kiln's releases) at its next check."""


def _released(held, seconds=60):
    """Whether the object `held` (a weak reference) refers to is freed, waiting for it at most
    `seconds`: a queue's thread drops its last use of bound memory after it signals the stream,
    so on a busy machine the release can come a moment after stream.wait() returned. Polling
    orders nothing; it only gives that thread the time it needs."""
    deadline = time.monotonic() + seconds
    while held() is not None and time.monotonic() < deadline:
        _let_pending_calls_run()
        gc.collect()
        time.sleep(0.001)
    return held() is None


def test_an_array_dropped_while_a_routine_uses_it(host_device):
    prog = kiln.Program.from_text(AFFINE)
    backend = kiln.Backend(host_device)
    stream = backend.new_stream()
    tensors = kiln.Tensors(prog)
    ctx = backend.context(stream, tensors).link(backend.compile(prog))
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    expected = x + 1
    held = weakref.ref(x)
    assert ctx.bind("x", x)
    gate = kiln.Semaphore()
    stream.wait_for(gate, 1)
    ctx.routine("main").run()  # queued behind the gate: it reads x's memory later
    assert ctx.bind("x", np.zeros((4, 10), np.float32))  # the binding moves on
    del x
    gc.collect()  # and Python's last reference is gone
    assert held() is not None  # the queued routine still uses it: kiln holds it
    gate.signal(1)
    stream.wait()
    np.testing.assert_array_equal(tensors.get("y"), expected)
    backend.close()
    del ctx, stream, backend
    assert _released(held)


def test_context_bind_reports_a_copy():
    prog = kiln.Program.from_text(AFFINE)
    for device in [d for d in ("cpu", "opencl") if d in kiln.devices()]:
        backend = kiln.Backend(device)
        tensors = kiln.Tensors(prog)
        ctx = backend.context(backend.new_stream(), tensors).link(backend.compile(prog))
        x = np.ones((4, 10), np.float32)
        assert ctx.bind("x", x) == (device == "cpu")
        assert not ctx.bind("x", misaligned(x))
        ctx.routine("main").run()
        np.testing.assert_array_equal(tensors.get("y"), np.full((4, 10), 2, np.float32))
        with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\]"):
            ctx.bind("x", np.ones(3, np.float32))
        with pytest.raises(ValueError, match="no node named 'nope'"):
            ctx.bind("nope", x)
        backend.close()


def test_host_semaphores():
    gate = kiln.Semaphore(2)
    assert gate.value == 2
    gate.signal(5)
    gate.wait(5, timeout=0)
    with pytest.raises(ValueError, match="not above"):
        gate.signal(5)
    backend = kiln.Backend("cpu")
    stream = backend.new_stream()
    with pytest.raises(ValueError, match="only a kiln.Semaphore"):
        stream.timeline.signal(1)
    stream.wait_for(gate, 6)
    with pytest.raises(kiln.Error, match="DEADLINE_EXCEEDED"):
        stream.wait(timeout=0)
    gate.signal(6)
    stream.wait()
    backend.close()
