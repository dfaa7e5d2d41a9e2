"""One compiled program called from several Python threads (docs/python.md, "Threads").

Each thread runs with inputs of its own shape and values and checks that it gets its own
results. Before calls on one program were made to run one after another, two threads corrupted
the heap ("double free or corruption"), raised errors caused by the other thread's sizes, or
returned the other thread's outputs. Ordered by nothing but the lock under test: no sleeps.
"""

import threading

import kiln
import numpy as np


SOFTMAX = """\
size B
size T
input  x : f32[B, T]
input  scale : f32[]
output y : f32[B, T]
output rows : f32[B]
y[b, t] = exp(x[b, t] * scale - max(x[b, u] * scale)) / sum(exp(x[b, v] * scale - max(x[b, u] * scale)))
rows[b] = sum(x[b, t]) * scale
"""

ROUNDS = 60
SHAPES = {(b, t) for b in range(1, 6) for t in range(2, 9)}
THREADS = 4


def expected(x, scale):
    z = x * scale
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), x.sum(axis=1) * scale


def hammer(run, worker, failures, start, sizes_too):
    rng = np.random.default_rng(worker)
    start.wait()
    try:
        for n in range(ROUNDS):
            # Shapes differ between threads and between rounds: the other thread's sizes must
            # never be this call's.
            b, t = 1 + (worker + n) % 5, 2 + (3 * worker + n) % 7
            x = rng.standard_normal((b, t)).astype(np.float32)
            scale = np.float32(0.5 + worker)
            if sizes_too and n % 2:
                out = run(x=x, scale=scale, sizes={"B": b, "T": t})
            else:
                out = run(x=x, scale=scale)
            want_y, want_rows = expected(x, scale)
            assert out["y"].shape == (b, t)
            np.testing.assert_allclose(out["y"], want_y, rtol=2e-5, atol=1e-6)
            np.testing.assert_allclose(out["rows"], want_rows, rtol=2e-5, atol=1e-5)
            # The other methods take their turn too; between two calls another thread's run may
            # come, so what they return is some thread's whole value (docs/python.md, "Threads").
            got = run.get("x")
            assert got.shape in SHAPES and np.isfinite(got).all()
            assert run.tensor("y").shape in SHAPES
    except BaseException as e:  # noqa: BLE001: every failure of a thread is reported
        failures.append((worker, e))


def test_runs_from_several_threads_get_their_own_results(device):
    run = kiln.Program.from_text(SOFTMAX).compile(device=device)
    failures = []
    start = threading.Barrier(THREADS)
    threads = [threading.Thread(target=hammer, args=(run, w, failures, start, w % 2 == 1)) for w in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures


def test_set_and_run_from_threads_keep_each_run_whole():
    # A param set by one thread and a run by another: each run sees one value of w, never a mix,
    # and the result matches the w that run saw.
    run = kiln.Program.from_text(
        "input x : f32[64]\nparam w : f32[64] = 0\noutput y : f32[64]\ny[i] = x[i] + w[i]\n").compile(device="cpu")
    failures = []
    start = threading.Barrier(2)

    def setter():
        start.wait()
        for n in range(200):
            run.set("w", np.full(64, float(n), np.float32))

    def runner():
        start.wait()
        try:
            for _ in range(200):
                y = run(x=np.zeros(64, np.float32))["y"]
                assert (y == y[0]).all(), y
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=setter), threading.Thread(target=runner)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures


def test_a_custom_call_in_python_runs_while_another_thread_waits():
    # The thread waiting for its turn must not hold the GIL: the running call needs it for the
    # Python function. A deadlock here would hang (ctest's timeout reports it).
    name = "threads_test_add_one"
    kiln.register_call(name, lambda x, y: y.__setitem__(slice(None), x + 1))
    run = kiln.Program.from_text(
        f"input x : f32[8]\noutput y : f32[8]\ncall {name}(x) -> y\n").compile(device="cpu")
    failures = []
    start = threading.Barrier(3)

    def worker(k):
        start.wait()
        try:
            for n in range(50):
                x = np.full(8, float(k * 100 + n), np.float32)
                np.testing.assert_array_equal(run(x=x)["y"], x + 1)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures
