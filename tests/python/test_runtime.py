"""The multi-stream runtime from Python: backends, streams, contexts, transfers, timelines."""

import kiln
import numpy as np
import pytest

# Two shards compute partial sums; shard 1's is merged into shard 0's through a merge buffer.
SHARDED = """\
input  x : f32[8]
param  s : f32
routine partial {
  s = sum(x[i])
}
routine merge {
  s += s.merge
}
"""


def two_streams(device):
    prog = kiln.Program.from_text(SHARDED)
    backend = kiln.Backend(device, max_workgroups=1)
    code = backend.compile(prog, shared=True)
    assert sorted(code.routines) == ["merge", "partial"]
    shards = []
    for _ in range(2):
        tensors = kiln.Tensors(prog)
        stream = backend.new_stream()
        shards.append((tensors, backend.context(stream, tensors).link(code)))
    return backend, shards


def test_data_parallel_sum_with_a_merge_buffer(device):
    backend, shards = two_streams(device)
    (t0, c0), (t1, c1) = shards
    t0.set("x", np.arange(8, dtype=np.float32))
    t1.set("x", np.full(8, 10, np.float32))
    c0.routine("partial").run()
    c1.routine("partial").run()
    kiln.device_to_device("s", c0, c1, merge="copy")
    c0.routine("merge").run()
    c0.stream.wait()
    assert t0.get("s") == 28 + 80
    assert t1.get("s") == 80
    backend.wait()


def test_stream_timeline_advances():
    backend, [(t0, c0), _] = two_streams("cpu")
    timeline = c0.stream.timeline
    start = timeline.value
    c0.routine("partial").run()
    timeline.wait(start + 1, timeout=30)
    assert timeline.value >= start + 1
    with pytest.raises(kiln.Error, match="DEADLINE_EXCEEDED"):
        timeline.wait(timeline.value + 1000, timeout=0.01)


def test_explicit_transfers():
    backend, [(t0, c0), _] = two_streams("cpu")
    t0.set("x", np.ones(8, np.float32))
    assert kiln.from_host(c0, "x") is True  # stale: uploaded now
    assert kiln.from_host(c0, "x") is False  # nothing more to move
    c0.routine("partial").run()
    kiln.to_host(c0, "s")
    c0.stream.wait()
    assert t0.get("s") == 8


def test_runtime_errors():
    backend, [(t0, c0), _] = two_streams("cpu")
    with pytest.raises(ValueError, match="no routine 'train' linked"):
        c0.routine("train")
    with pytest.raises(ValueError, match='merge must be "no", "copy" or "streaming"'):
        kiln.device_to_device("s", c0, c0, merge="sideways")
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[8\]"):
        t0.set("x", np.ones(7, np.float32))
    with pytest.raises(ValueError, match="nope"):
        t0.get("nope")
    other = kiln.Backend("cpu")
    with pytest.raises(ValueError, match="belongs to another backend"):
        backend.context(other.new_stream(), t0)
    with pytest.raises(ValueError, match="timeout"):
        c0.stream.wait(timeout=-1)
    with pytest.raises(kiln.Error):
        kiln.Backend("nosuchdevice")


def test_handles_may_be_dropped_in_any_order():
    backend, [(t0, c0), _] = two_streams("cpu")
    routine = c0.routine("partial")
    t0.set("x", np.ones(8, np.float32))
    del backend, c0
    routine.run()  # the routine keeps its context, stream and backend alive
    assert t0.get("s") == 8


def test_every_public_name_is_documented():
    for name in kiln.__all__:
        if name == "__version__":
            continue
        obj = getattr(kiln, name)
        assert obj.__doc__, name


def test_closed_backend_refuses_every_handle():
    backend, [(t0, c0), _] = two_streams("cpu")
    routine = c0.routine("partial")
    stream = c0.stream
    t0.set("x", np.ones(8, np.float32))
    routine.run()
    with backend as same:
        assert same is not None
    backend.close()  # closing again is allowed
    for call in (routine.run, stream.wait, backend.new_stream, backend.wait,
                 lambda: kiln.device_to_device("s", c0, c0), lambda: stream.timeline.value):
        with pytest.raises(kiln.Error, match="the backend on 'cpu' is closed"):
            call()
    assert t0.get("s") == 8  # the host copies stay readable: the work was waited for


# `w` is written by one stream and read by another; `out` is each context's own result.
SHARED_PARAM = """\
param  w : f32[4]
output out : f32[4]
routine bump {
  w[i] = w[i] + 1
}
routine read {
  out[i] = w[i] * 2
}
"""


def contexts_over_one_table(sharing):
    prog = kiln.Program.from_text(SHARED_PARAM)
    tensors = kiln.Tensors(prog)
    if sharing:
        tensors.set_sharing("w", sharing)
    backend = kiln.Backend("cpu", max_workgroups=1)
    code = backend.compile(prog, shared=True)
    c0, c1 = (backend.context(backend.new_stream(), tensors).link(code) for _ in range(2))
    return backend, tensors, c0, c1


def test_a_shared_param_is_read_by_another_stream_without_a_copy():
    backend, tensors, c0, c1 = contexts_over_one_table("shared")
    c0.routine("bump").run()
    c1.routine("read").run()  # ordered after stream 0's write: the same array
    c1.stream.wait()
    np.testing.assert_array_equal(tensors.get("out"), np.full(4, 2, np.float32))
    # The stream that wrote it first owns it: another stream may not write it.
    with pytest.raises(kiln.Error, match="owned by the stream that first wrote it"):
        c1.routine("bump").run()
    backend.wait()


def test_a_per_stream_param_is_the_other_streams_own_array():
    backend, tensors, c0, c1 = contexts_over_one_table("per_stream")
    c0.routine("bump").run()
    c0.stream.wait()
    c1.routine("read").run()  # its own w, still the initial zeros
    c1.stream.wait()
    np.testing.assert_array_equal(tensors.get("out"), np.zeros(4, np.float32))
    backend.wait()


def test_set_sharing_refuses_bad_arguments_and_late_calls():
    backend, tensors, c0, _ = contexts_over_one_table(None)
    with pytest.raises(ValueError, match='"shared" or "per_stream", not "everywhere"'):
        tensors.set_sharing("w", "everywhere")
    with pytest.raises(ValueError, match="nope"):
        tensors.set_sharing("nope", "shared")
    # Linked contexts hold arrays of w already.
    with pytest.raises(kiln.Error, match="FAILED_PRECONDITION"):
        tensors.set_sharing("w", "shared")
    backend.wait()
