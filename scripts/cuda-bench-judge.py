#!/usr/bin/env python3
"""Judges bench/cuda_bench's figures against the CUDA driver's targets: reads the benchmark's JSON
(--benchmark_out, with repetitions), compares each kiln row's median real time with its direct
CUDA baseline's from the same run, and prints a line per target. Exit status: the number of
targets missed, or 100 when a row is missing (the benchmark skipped or failed).
Usage: scripts/cuda-bench-judge.py CUDA_BENCH_JSON"""
import json
import sys

# (kiln row, baseline row, what, target): time ratios kiln/baseline at most `target`; copies
# and the library product are bandwidth or FLOP-rate ratios baseline/kiln at least `target`.
# The dispatch rows judged are kernels that cannot fail (may_fail:0), what kiln generates for code
# without checks and the same work as the direct launch; the may_fail:1 rows (a status slot read
# back, the wait gate) are printed beside them.
TARGETS = [
    ("BM_KilnDispatch/may_fail:0", "BM_DirectDispatch", "dispatch, submit + wait (time)", ("<=", 1.2)),
    ("BM_KilnDispatch/may_fail:1", "BM_DirectDispatch", "the same, a kernel that may fail (time)", None),
    ("BM_KilnChain/may_fail:0", "BM_DirectChain", "16 kernels across two queues (time)", ("<=", 1.5)),
    ("BM_KilnChain/may_fail:1", "BM_DirectChain", "the same, kernels that may fail (time)", None),
    ("BM_KilnCopy/write:1", "BM_DirectCopy/write:1", "64 MiB host -> device (bandwidth)", (">=", 0.9)),
    ("BM_KilnCopy/write:0", "BM_DirectCopy/write:0", "64 MiB device -> host (bandwidth)", (">=", 0.9)),
    ("BM_KilnGemm/cublas:1", "BM_DirectCublasSgemm", "2048^3 f32 gemm through cuBLAS (FLOP rate)", (">=", 0.9)),
]
SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def medians(path):
    with open(path) as f:
        report = json.load(f)
    out = {}
    for b in report.get("benchmarks", []):
        if b.get("aggregate_name", "median") == "median" and "error_occurred" not in b:
            # UseRealTime() names a row NAME/real_time.
            name = b.get("run_name", b["name"]).removesuffix("/real_time")
            out[name] = b["real_time"] * SCALE[b.get("time_unit", "ns")]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    times = medians(sys.argv[1])
    missed = 0
    for kiln, base, what, judged in TARGETS:
        if kiln not in times or base not in times:
            print(f"MISSING  {what}: no median for {kiln if kiln not in times else base}")
            return 100
        if judged is None:
            print(f"shown    {what}: kiln {times[kiln] * 1e6:.1f} us, direct {times[base] * 1e6:.1f} us,"
                  f" ratio {times[kiln] / times[base]:.2f}")
            continue
        sense, target = judged
        ratio = times[kiln] / times[base] if sense == "<=" else times[base] / times[kiln]
        met = ratio <= target if sense == "<=" else ratio >= target
        missed += not met
        print(f"{'met   ' if met else 'MISSED'}   {what}: kiln {times[kiln] * 1e6:.1f} us, direct {times[base] * 1e6:.1f} us,"
              f" ratio {ratio:.2f} (target {sense} {target})")
    return missed


sys.exit(main())
