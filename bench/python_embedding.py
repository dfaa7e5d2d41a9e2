"""What embedding kiln in a Python framework costs: arrays handed to a run (bound against copied)
and custom calls written in Python, each against a baseline measured in the same run.

    python bench/python_embedding.py [--build BUILD] [--rounds N]

1. Zero-copy in: `run(x=a)` of `y = x * 2` over 2^24 f32 (64 MiB) on cpu, with `a` an aligned
   writable array (bound as the tensor's memory) against the same values in a read-only array
   (copied into kiln's array first, as before binding existed), and NumPy's `a * 2` (a new
   array, as the run returns `y` as a new array).
2. A Python custom call: `call scale_rows(x, factor=2) -> y` on 4x3 f32, the function writing
   `y[...] = x * factor`, against the same routine written as a statement (`y[i, j] = x[i, j] * 2`)
   and against calling the Python function directly on NumPy arrays.

The machine is shared and noisy: the contenders alternate within each of --rounds rounds, and
the figures are the medians over rounds (of each round's median).
"""

import argparse
import pathlib
import statistics
import sys
import time

LARGE = "size N\ninput x : f32[N]\noutput y : f32[N]\ny[i] = x[i] * 2\n"
CALL = "input x : f32[4, 3]\noutput y : f32[4, 3]\ncall scale_rows(x, factor=2) -> y\n"
STATEMENT = "input x : f32[4, 3]\noutput y : f32[4, 3]\ny[i, j] = x[i, j] * 2\n"


def per_call_us(fn, calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", type=pathlib.Path)
    parser.add_argument("--rounds", default=5, type=int)
    args = parser.parse_args()
    sys.path.insert(0, str(args.build / "python"))
    import kiln
    import numpy as np

    def scale_rows(x, y, *, factor):
        y[...] = x * factor

    kiln.register_call("scale_rows", scale_rows)
    large = kiln.Program.from_text(LARGE).compile(device="cpu")
    with_call = kiln.Program.from_text(CALL).compile(device="cpu")
    with_statement = kiln.Program.from_text(STATEMENT).compile(device="cpu")

    a = np.random.default_rng(0).random(1 << 24, dtype=np.float32)
    read_only = a.copy()
    read_only.flags.writeable = False  # kiln cannot bind it: it copies
    small = np.ones((4, 3), np.float32)
    small_out = np.empty_like(small)

    rows = {name: [] for name in ("bound", "copied", "numpy", "call", "statement", "python")}
    for _ in range(args.rounds):
        rows["bound"].append(statistics.median(per_call_us(lambda: large(x=a), 5) for _ in range(5)))
        rows["copied"].append(statistics.median(per_call_us(lambda: large(x=read_only), 5) for _ in range(5)))
        rows["numpy"].append(statistics.median(per_call_us(lambda: a * 2, 5) for _ in range(5)))
        rows["call"].append(statistics.median(per_call_us(lambda: with_call(x=small), 2000) for _ in range(5)))
        rows["statement"].append(statistics.median(
            per_call_us(lambda: with_statement(x=small), 2000) for _ in range(5)))
        rows["python"].append(statistics.median(
            per_call_us(lambda: scale_rows(small, small_out, factor=2.0), 2000) for _ in range(5)))

    m = {name: statistics.median(values) for name, values in rows.items()}
    spread = {name: (min(values), max(values)) for name, values in rows.items()}
    print(f"y = x * 2 over 2^24 f32, run(x=a): bound {m['bound']:.0f} us, copied {m['copied']:.0f} us, "
          f"NumPy a * 2 {m['numpy']:.0f} us; bound / copied {m['bound'] / m['copied']:.2f}x, "
          f"bound / NumPy {m['bound'] / m['numpy']:.2f}x")
    print(f"Python custom call on 4x3 f32: run {m['call']:.2f} us, the same as a statement "
          f"{m['statement']:.2f} us (added {m['call'] - m['statement']:.2f} us), the Python function "
          f"called directly {m['python']:.2f} us")
    for name, (low, high) in spread.items():
        print(f"  {name}: {low:.2f} .. {high:.2f} us over {args.rounds} rounds")


if __name__ == "__main__":
    main()
