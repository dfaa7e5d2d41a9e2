#!/usr/bin/env python3
"""One pre-LayerNorm GPT-style decoder block (decoder_block.kiln beside this file) from Python,
against the same block in PyTorch eager.

kiln compiles the program once for every batch B and length T (they are sizes), initializes its
parameters from their initializers, and this script reads them out and gives them to PyTorch
(decoder_reference.torch_block), so both compute the same function. For each batch it runs a
forward pass on the same input in both, checks that they agree with each other and with a
float64 NumPy reference, then prints the median time of a forward pass over --runs runs of each,
one after the other in this process. Without PyTorch (the build's virtual environment has none)
it checks kiln against the NumPy reference alone and says so.

    run_decoder.py [--device cpu] [--batches 1,8] [--length 32] [--runs 200] [--threads N] [--seed 0] [--cold]

--threads gives kiln's cpu device (KILN_CPU_THREADS) and PyTorch the same number of threads, by
default the machine's core count (PyTorch alone would take one per physical core).

--cold compiles into a fresh, empty kernel cache (a temporary KILN_CACHE_DIR), so that the
compile time printed is that of a first compile; otherwise a second run finds the kernels in
the cache.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decoder_reference  # noqa: E402 (found through the line above)

TOLERANCE = 1e-5  # largest |difference| accepted, relative to the largest |y| (at least 1)


def median_ms(fn, runs):
    fn()  # warm-up: first touch of the arrays, the first run's setup
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="kiln's device (default cpu)")
    ap.add_argument("--batches", default="1,8", help="batch sizes B, comma-separated (default 1,8)")
    ap.add_argument("--length", type=int, default=32, help="sequence length T (default 32)")
    ap.add_argument("--runs", type=int, default=200, help="timed forward passes per batch and peer (default 200)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of kiln's cpu device and of PyTorch (default: the cores)")
    ap.add_argument("--seed", type=int, default=0, help="seed of kiln's initializers and of the input (default 0)")
    ap.add_argument("--cold", action="store_true", help="compile into a fresh, empty kernel cache")
    args = ap.parse_args()
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches takes whole numbers separated by commas, got {args.batches!r}")
    if args.length < 1 or args.runs < 1 or args.threads < 1 or min(args.batches) < 1:
        ap.error("--batches, --length, --runs and --threads must be at least 1")
    return args


def main():
    args = parse_args()
    # Both read when the device is opened, so before the first compile.
    os.environ["KILN_CPU_THREADS"] = str(args.threads)
    if args.cold:
        os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-decoder-cache-")
    import kiln
    try:
        import torch
    except ImportError:
        torch = None

    program = kiln.Program.from_file(str(decoder_reference.PROGRAM))
    start = time.perf_counter()
    run = program.compile(device=args.device, seed=args.seed)
    compile_s = time.perf_counter() - start
    threads = f"{args.threads} thread{'' if args.threads == 1 else 's'}"
    cache = "fresh cache" if args.cold else "kernel cache as found"
    print(f"decoder block (width 64, 4 heads of 16, MLP 256, exact GELU, causal attention) on kiln's "
          f"{args.device} ({threads}): compiled in {compile_s:.2f} s ({cache})")

    # kiln's own initial parameters, read back, are what PyTorch and NumPy get too.
    params = {name: run.get(name) for name in decoder_reference.PARAMETERS}
    if torch is None:
        print("PyTorch is not installed in this Python: checking kiln against NumPy alone, no PyTorch times "
              "(Debian's python3-torch for /usr/bin/python3 has it: scripts/install-deps.sh python3-torch)")
        torch_forward = None
    else:
        torch.set_num_threads(args.threads)
        torch_forward = decoder_reference.torch_block(torch, params)
        print(f"PyTorch {torch.__version__} eager, {threads}")

    rng = np.random.default_rng(args.seed)
    failed = False
    for batch in args.batches:
        x = rng.standard_normal((batch, args.length, 64), dtype=np.float32)
        y = run(x=x)["y"]
        reference = decoder_reference.numpy_forward(params, x)
        tolerance = TOLERANCE * max(1.0, float(np.abs(reference).max()))
        errors = {"NumPy float64": float(np.abs(y - reference).max())}
        if torch_forward:
            x_torch = torch.from_numpy(x)
            errors["PyTorch"] = float(np.abs(y - torch_forward(x_torch).numpy()).max())
        ok = all(e <= tolerance for e in errors.values())
        failed |= not ok
        print(f"B = {batch}, T = {args.length}: max |kiln - peer| " +
              ", ".join(f"{e:.2e} ({name})" for name, e in errors.items()) +
              f", tolerance {tolerance:.1e}: {'agree' if ok else 'DISAGREE'}")
        kiln_ms = median_ms(lambda: run(x=x), args.runs)
        line = f"  forward pass, median of {args.runs}: kiln {kiln_ms:.3f} ms"
        if torch_forward:
            torch_ms = median_ms(lambda: torch_forward(x_torch), args.runs)
            line += f", PyTorch {torch_ms:.3f} ms, kiln / PyTorch {kiln_ms / torch_ms:.2f}"
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
