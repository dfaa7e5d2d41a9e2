"""Dropping handles never loses a result: Tensors.get returns what the device wrote after the last
handles of its context and backend are gone (with or without close()), on every device."""

import gc

import kiln
import numpy as np

DOUBLE = """\
input  x : f32[8]
output g : f32[8]
routine main {
  g[i] = x[i] * 2
}
"""
PROGRAM = kiln.Program.from_text(DOUBLE)


def run_and_drop(tensors, device, close):
    """Runs main over `tensors` on a backend of its own; every handle goes when this returns."""
    backend = kiln.Backend(device)
    context = backend.context(backend.new_stream(), tensors).link(backend.compile(PROGRAM))
    context.routine("main").run()
    if close:
        backend.close()


def test_get_after_the_backend_and_context_are_dropped(device):
    tensors = kiln.Tensors(PROGRAM)
    x = np.arange(8, dtype=np.float32)
    tensors.set("x", x)
    run_and_drop(tensors, device, close=False)
    gc.collect()
    np.testing.assert_array_equal(tensors.get("g"), x * 2)
    np.testing.assert_array_equal(tensors.get("g"), x * 2)  # the host copy's now


def test_get_after_close_and_drop(device):
    tensors = kiln.Tensors(PROGRAM)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    tensors.set("x", x)
    run_and_drop(tensors, device, close=True)
    gc.collect()
    np.testing.assert_array_equal(tensors.get("g"), x * 2)


def test_set_replaces_a_kept_value(device):
    tensors = kiln.Tensors(PROGRAM)
    tensors.set("x", np.ones(8, np.float32))
    run_and_drop(tensors, device, close=False)
    mine = np.full(8, 5, np.float32)
    tensors.set("g", mine)
    np.testing.assert_array_equal(tensors.get("g"), mine)
