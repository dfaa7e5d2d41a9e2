#!/usr/bin/env python3
"""Compile times of every example program and of the peers table's programs, by phase.

For each program, `kiln compile PROGRAM --timings` runs twice with a kernel cache of its own:
first empty (cold: kiln's phases, then the C compiler), then again (cached: the object loaded from
the disk cache). Prints a Markdown table, the form of docs/performance.md's ("Compile time").

    build/python-venv/bin/python bench/compile_times.py [--kiln build/kiln] [--device cpu] [--rounds 1]

(a Python with NumPy: bench/peers/tasks.py, which writes the peers' programs, imports it).

With --rounds N each program is compiled cold N times and the median is printed. The programs of
the peers table come from bench/peers/tasks.py (written to a temporary folder); the examples are
examples/kiln/*.kiln, the digits CNN and the decoder block.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
import tasks  # noqa: E402  (bench/peers/tasks.py: the peers' programs)

PHASES = ("parsing", "lowering", "passes", "emitting", "building")


def programs(folder):
    """(name, path) of every program to time; the peers' written into `folder`."""
    found = [(os.path.relpath(p, ROOT), p) for p in sorted(glob.glob(os.path.join(ROOT, "examples", "kiln", "*.kiln")))]
    found.append(("examples/digits/digits_cnn.kiln", os.path.join(ROOT, "examples", "digits", "digits_cnn.kiln")))
    found.append(("examples/transformer/decoder_block.kiln",
                  os.path.join(ROOT, "examples", "transformer", "decoder_block.kiln")))
    seen = set()
    for _, path in found:
        with open(path) as f:
            seen.add(f.read())
    for task in tasks.TASKS:
        text = tasks.kiln_program(task)
        if text is None or text in seen:
            continue
        seen.add(text)
        path = os.path.join(folder, task + ".kiln")
        with open(path, "w") as f:
            f.write(text)
        found.append(("peers: " + task, path))
    return found


def timings(kiln, device, path, cache):
    """The phases' seconds, the total, and the kernels and lines, from one --timings run."""
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    out = subprocess.run([kiln, "compile", path, "--device", device, "--timings"], env=env,
                         capture_output=True, text=True, check=True).stdout
    head = re.search(r"\((\w+), (\d+) kernels?, (\d+) lines", out)
    seconds = {}
    for line in out.splitlines():
        m = re.match(r"\s+([0-9.]+) s  (\w+)", line)
        if m and m.group(2) in PHASES + ("total",):
            seconds.setdefault(m.group(2), float(m.group(1)))
    kernels, lines = (int(head.group(2)), int(head.group(3))) if head else (0, 0)
    return seconds, kernels, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-compile-times-")
    try:
        print("| program | kernels, lines of C | parse + lower + passes + emit | C compiler | cold total | cached |")
        print("| --- | --- | --- | --- | --- | --- |")
        for name, path in programs(work):
            colds, cached = [], None
            for _ in range(args.rounds):
                cache = os.path.join(work, "cache")
                shutil.rmtree(cache, ignore_errors=True)
                colds.append(timings(args.kiln, args.device, path, cache))
                cached = timings(args.kiln, args.device, path, cache)
            kiln_s = statistics.median(sum(s.get(p, 0) for p in PHASES[:4]) for s, _, _ in colds)
            build_s = statistics.median(s.get("building", 0) for s, _, _ in colds)
            total_s = statistics.median(s.get("total", 0) for s, _, _ in colds)
            _, kernels, lines = colds[0]
            print(f"| {name} | {kernels}, {lines} | {kiln_s:.3f} s | {build_s:.2f} s | {total_s:.2f} s | "
                  f"{cached[0].get('total', 0):.3f} s |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
