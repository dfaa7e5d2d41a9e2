"""The Python package's cost per call: a tiny routine run from Python against the same calls from
C++, in the same run.

    python bench/python_call_overhead.py [--build BUILD] [--rounds N]

Python: run(x=a) of kiln.Program.compile("cpu") (write x, run, wait, read y into a new array).
C++: BM_TinyRoutineFromCpp/on_caller:1 of BUILD/bench/runtime_bench, the same runtime calls. Needs the Python
package built in BUILD/python (make build).

The machine is shared and noisy, and a call's wall time is mostly hand-offs between the caller
and the queue's thread (a few microseconds, more when both land on one core), so the two sides
alternate over --rounds rounds and two figures come out, each the median over rounds of
(Python - C++): the wall time per call, and the calling thread's CPU time per call, which is
what the Python layer itself adds to the caller's work.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

PROGRAM = "input x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * 2 + 1\n"


def cpp_medians_ns(build, repetitions):
    """(wall, calling thread's CPU) per call of the C++ benchmark, medians of its repetitions."""
    out = subprocess.run(
        [str(build / "bench" / "runtime_bench"), "--benchmark_filter=BM_TinyRoutineFromCpp/on_caller:1",
         f"--benchmark_repetitions={repetitions}", "--benchmark_format=json"],
        check=True, capture_output=True, text=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    scale = {"ns": 1, "us": 1e3, "ms": 1e6}
    return (statistics.median(b["real_time"] * scale[b["time_unit"]] for b in runs),
            statistics.median(b["cpu_time"] * scale[b["time_unit"]] for b in runs))


def python_medians_ns(run, x, repetitions, calls=20000):
    wall, cpu = [], []
    for _ in range(repetitions):
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            run(x=x)
        wall.append((time.perf_counter_ns() - start) / calls)
        cpu.append((time.thread_time_ns() - start_cpu) / calls)
    return statistics.median(wall), statistics.median(cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", type=pathlib.Path)
    parser.add_argument("--rounds", default=7, type=int)
    args = parser.parse_args()
    sys.path.insert(0, str(args.build / "python"))
    import kiln
    import numpy as np

    run = kiln.Program.from_text(PROGRAM).compile(device="cpu")
    x = np.array([1, 2, 3, 4], np.float32)
    for _ in range(1000):
        out = run(x=x)
    assert out["y"][3] == 9
    cpp, python = [], []
    for _ in range(args.rounds):
        cpp.append(cpp_medians_ns(args.build, 5))
        python.append(python_medians_ns(run, x, 5))
    for i, what in enumerate(("wall time", "caller's CPU time")):
        c = statistics.median(r[i] for r in cpp)
        p = statistics.median(r[i] for r in python)
        added = statistics.median(pr[i] - cr[i] for pr, cr in zip(python, cpp))
        print(f"tiny routine on cpu, {what} per call ({args.rounds} rounds): C++ {c / 1e3:.2f} us, "
              f"Python {p / 1e3:.2f} us, added {added / 1e3:.2f} us (Python / C++ {p / c:.2f})")


if __name__ == "__main__":
    main()
