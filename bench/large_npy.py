"""Large data through `kiln run` against NumPy, in the same run: y = 2x over 2^28 f32 by default
(1 GiB in, 1 GiB out), read from and written to .npy files.

    python bench/large_npy.py [--build BUILD] [--log2-elements N] [--rounds N] [--device cpu]

kiln: `kiln run y2x.kiln --input x=x.npy --output y=y.npy`. NumPy: `np.save("y.npy", 2 *
np.load("x.npy"))` in a fresh interpreter. Each writes a new file (--replace: over the last one;
kiln replaces a file atomically through a rename, which on ext4 also starts writing the new
file back to disk, so that a crash never leaves it empty; NumPy truncates and rewrites). The two alternate over --rounds rounds (the first of
a round changes from round to round), each a process of its own, and the figures are the median
wall time and the median peak resident memory (the process's maxrss), with kiln's divided by
NumPy's. The files live in a temporary folder under BUILD (removed at the end); the first run
of each round finds x.npy in the page cache, as the second does. Needs NumPy (the Python test
environment of `make build`).
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

NUMPY_JOB = "import numpy as np, sys; np.save(sys.argv[2], 2 * np.load(sys.argv[1]))"


def run_measured(cmd):
    """(wall seconds, peak resident bytes) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} exited with {proc.returncode}")
    return wall, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--log2-elements", type=int, default=28)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dir", help="where the files go (default: a temporary folder under BUILD)")
    parser.add_argument("--replace", action="store_true",
                        help="each run replaces the output of the one before (default: the outputs are removed "
                             "before each run, unmeasured, so that both write new files)")
    args = parser.parse_args()
    import numpy as np

    build = pathlib.Path(args.build).resolve()
    n = 1 << args.log2_elements
    with tempfile.TemporaryDirectory(prefix="kiln-large-npy-", dir=args.dir or build) as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "y2x.kiln").write_text(f"input x : f32[{n}]\noutput y : f32[{n}]\ny[i] = 2 * x[i]\n")
        x = np.random.default_rng(0).random(n, dtype=np.float32)
        np.save(tmp / "x.npy", x)
        del x
        kiln = [str(build / "kiln"), "run", str(tmp / "y2x.kiln"), "--device", args.device,
                "--input", f"x={tmp / 'x.npy'}", "--output", f"y={tmp / 'y_kiln.npy'}"]
        numpy = [sys.executable, "-c", NUMPY_JOB, str(tmp / "x.npy"), str(tmp / "y_numpy.npy")]
        run_measured(kiln)  # compiles the program into the disk cache; not measured
        times = {"kiln": [], "numpy": []}
        peaks = {"kiln": [], "numpy": []}
        for r in range(args.rounds):
            order = [("kiln", kiln), ("numpy", numpy)]
            for name, cmd in order if r % 2 == 0 else reversed(order):
                if not args.replace:
                    (tmp / f"y_{name}.npy").unlink(missing_ok=True)
                wall, peak = run_measured(cmd)
                times[name].append(wall)
                peaks[name].append(peak)
        if (tmp / "y_kiln.npy").read_bytes() != (tmp / "y_numpy.npy").read_bytes():
            sys.exit("kiln's y.npy differs from NumPy's")

    mib = 1 << 20
    t = {k: statistics.median(v) for k, v in times.items()}
    m = {k: statistics.median(v) for k, v in peaks.items()}
    print(f"y = 2x over 2^{args.log2_elements} f32 ({n * 4 // mib} MiB in, {n * 4 // mib} MiB out), "
          f"{args.rounds} rounds, device {args.device}, "
          f"{'replacing the outputs' if args.replace else 'new output files'} in {args.dir or 'BUILD'}")
    for k in ("kiln", "numpy"):
        print(f"  {k:6} median {t[k]:.2f} s (min {min(times[k]):.2f}, max {max(times[k]):.2f}), "
              f"peak memory {m[k] / mib:.0f} MiB")
    print("  runs (s):", {k: [round(t, 2) for t in v] for k, v in times.items()})
    print(f"  kiln / numpy: time {t['kiln'] / t['numpy']:.2f}x, peak memory {m['kiln'] / m['numpy']:.2f}x")


if __name__ == "__main__":
    main()
