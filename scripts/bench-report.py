#!/usr/bin/env python3
"""Runs kiln's benchmarks and prints the rows of the tables of docs/performance.md: medians of repeated runs
and the ratios against the baselines measured in the same run (the machine is shared and noisy,
so only ratios within one run mean anything)."""
import json
import subprocess
import sys

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
REPS = "7"


def medians(binary, extra=()):
    out = subprocess.run(
        [f"{BUILD}/bench/{binary}", f"--benchmark_repetitions={REPS}",
         "--benchmark_report_aggregates_only=true", "--benchmark_format=json", *extra],
        check=True, capture_output=True, text=True).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
            # Keyed by the name without "/iterations:N", "/real_time" and "/manual_time" parts.
            name = "/".join(p for p in b["run_name"].split("/")
                            if not p.startswith("iterations:") and p not in ("real_time", "manual_time"))
            result[name] = dict(b, ns=b["real_time"] * scale)
    return result


sem = medians("semaphore_bench")
rows = []
disp = medians("dispatch_bench")
cv = sem["BM_CondvarPingPong"]["ns"]
wake = sem["BM_SemaphorePingPong"]["ns"]
cv_parked = sem["BM_CondvarWakeParked"]["ns"]
sem_parked = sem["BM_SemaphoreWakeParked"]["ns"]
trip = disp["BM_DispatchRoundTrip"]["ns"]
submit = disp["BM_SubmitBurst/1000"]["submit_ns_per_action"]
t1 = disp["BM_ComputeDispatch/threads:1"]["ns"]
t2 = disp["BM_ComputeDispatch/threads:2"]["ns"]

rows += [
    ("host signal → host waiter wakes (per hand-off)", f"{wake / 2 / 1e3:.2f} µs",
     f"condition variable {cv / 2 / 1e3:.2f} µs", f"{wake / cv:.3f}×", "≤ 1.2×"),
    ("signal → wake of a waiter already asleep (futex path)", f"{sem_parked / 1e3:.2f} µs",
     f"condition variable {cv_parked / 1e3:.2f} µs", f"{sem_parked / cv_parked:.3f}×", "≤ 1.2×"),
    ("submit → empty dispatch → signal → host wakes", f"{trip / 1e3:.2f} µs",
     f"condition-variable round trip {cv / 1e3:.2f} µs", f"{trip / cv:.3f}×", "≤ 2×"),
    ("submit, per action in a burst of 1000", f"{submit:.0f} ns", "—", "—", "< 1 µs"),
    ("64-workgroup compute dispatch, 2 threads vs 1", f"{t2 / 1e6:.1f} ms",
     f"1 thread {t1 / 1e6:.1f} ms", f"{t1 / t2:.2f}× faster", "≥ 1.8×"),
]
comp = medians("compiler_bench")
memcpy_bps = comp["BM_Memcpy"]["bytes_per_second"]
chain_bps = comp["BM_ElementwiseChain"]["bytes_per_second"]
rows.append(("y = relu(a * b + c), 2^24 f32 (bytes moved/s)", f"{chain_bps / 1e9:.1f} GB/s",
             f"memcpy {memcpy_bps / 1e9:.1f} GB/s", f"{chain_bps / memcpy_bps:.2f}×", "≥ 0.9×"))
# Row reductions with float reductions split into lanes against the same in program order.
for arg, what in (("0", "row sum"), ("1", "row softmax")):
    split = comp[f"BM_RowReduction/softmax:{arg}/reassociate:1"]["ns"]
    strict = comp[f"BM_RowReduction/softmax:{arg}/reassociate:0"]["ns"]
    rows.append((f"{what} 4096×1024 f32, reductions in vector lanes", f"{split / 1e6:.2f} ms",
                 f"--strict-fp {strict / 1e6:.2f} ms", f"{strict / split:.1f}× faster", "—"))
# Matrix products written in the language (2 threads) against OpenBLAS sgemm called directly.
for n, auto, target in ((1024, 1, "≥ 0.95×"), (512, 1, "≥ 0.95×"), (512, 0, "≥ 0.8×"), (1024, 0, "≥ 0.8×"), (32, 1, "—"), (32, 0, "—")):
    sgemm = comp[f"BM_OpenBlasSgemm/n:{n}"]["GFLOPS"]
    matmul = comp[f"BM_KilnMatmul/n:{n}/auto_calls:{auto}"]["GFLOPS"]
    how = "automatic gemm call" if auto else "generated kernel (--no-auto-calls)"
    rows.append((f"{n}³ f32 matrix product, {how}, 2 threads", f"{matmul / 1e9:.1f} GFLOP/s",
                 f"OpenBLAS sgemm {sgemm / 1e9:.1f} GFLOP/s", f"{matmul / sgemm:.2f}×", target))
for i in range(6):
    cold = comp[f"BM_CompileCold/{i}"]
    warm = comp[f"BM_CompileWarm/{i}"]
    rows.append((f"compile {cold['label']}: warm (disk cache) vs cold (C compiler)",
                 f"{warm['ns'] / 1e6:.2f} ms", f"cold {cold['ns'] / 1e6:.0f} ms",
                 f"{cold['ns'] / warm['ns']:.0f}× faster", "≥ 10×"))

rt = medians("runtime_bench")
t1 = rt["BM_TrainMoons/streams:1/workgroups:1/auto_calls:1"]["ns"]
t2 = rt["BM_TrainMoons/streams:2/workgroups:1/auto_calls:1"]["ns"]
k1 = rt["BM_TrainMoons/streams:1/workgroups:0/auto_calls:1"]["ns"]
k2 = rt["BM_TrainMoons/streams:2/workgroups:0/auto_calls:1"]["ns"]
g1 = rt["BM_TrainMoons/streams:1/workgroups:1/auto_calls:0"]["ns"]
g2 = rt["BM_TrainMoons/streams:2/workgroups:1/auto_calls:0"]["ns"]
routine = rt["BM_RoutineWithNodeSync/on_caller:1"]["ns"]
queued = rt["BM_RoutineWithNodeSync/on_caller:0"]["ns"]
tiny = rt["BM_TinyRoutineFromCpp/on_caller:1"]["ns"]
tiny_queued = rt["BM_TinyRoutineFromCpp/on_caller:0"]["ns"]
bare = rt["BM_BareHalDispatch"]["ns"]
rows += [
    ("training demo, time per epoch, 2 streams vs 1 (a stream is one core)", f"{t2 / 1e6:.2f} ms",
     f"1 stream {t1 / 1e6:.2f} ms", f"{t1 / t2:.2f}× faster", "≥ 1.6×"),
    ("the same with kernels split over both cores", f"2 streams {k2 / 1e6:.2f} ms",
     f"1 stream {k1 / 1e6:.2f} ms", f"{k1 / k2:.2f}×", "—"),
    ("the demo, 2 streams, products by gemm calls vs generated kernels", f"{t2 / 1e6:.2f} ms",
     f"generated kernels {g2 / 1e6:.2f} ms (1 stream {g1 / 1e6:.2f} ms)", f"{g2 / t2:.2f}× faster", "—"),
    ("routine with per-node sync over 8 nodes, run + await", f"{routine / 1e3:.2f} µs (on the caller's thread; "
     f"{queued / 1e3:.2f} µs on the queue's)", f"bare HAL dispatch {bare / 1e3:.2f} µs", f"{routine / bare:.2f}×", "≤ 1.2×"),
    ("a tiny routine from C++ as Python calls it: write, run, await, read", f"{tiny / 1e3:.2f} µs on the caller's thread",
     f"on the queue's thread {tiny_queued / 1e3:.2f} µs", f"{tiny / tiny_queued:.2f}×", "—"),
]
ocl = medians("opencl_bench")
if "BM_KilnDispatch" in ocl:  # skipped without an OpenCL platform
    kd, dd = ocl["BM_KilnDispatch"]["ns"], ocl["BM_DirectDispatch"]["ns"]
    rows.append(("OpenCL dispatch of a trivial kernel, submit + wait", f"{kd / 1e3:.1f} µs",
                 f"direct {dd / 1e3:.1f} µs", f"{kd / dd:.2f}×", "≤ 1.2×"))
    for arg, what in (("1", "host → device"), ("0", "device → host")):
        k = ocl[f"BM_KilnCopy/write:{arg}"]["bytes_per_second"]
        d = ocl[f"BM_DirectCopy/write:{arg}"]["bytes_per_second"]
        rows.append((f"OpenCL {what} copy, 64 MiB", f"{k / 1e9:.1f} GB/s", f"direct {d / 1e9:.1f} GB/s",
                     f"{k / d:.2f}×", "≥ 0.9×"))
    sg = ocl["BM_OpenBlasSgemm"]["GFLOPS"]
    for arg, what in (("0", "on the host over mapped buffers"), ("1", "through CLBlast")):
        g = ocl.get(f"BM_OpenClGemm/clblast:{arg}", {}).get("GFLOPS")
        if g:  # CLBlast may be missing
            rows.append((f"512³ f32 matrix product on opencl, gemm {what}", f"{g / 1e9:.2f} GFLOP/s",
                         f"OpenBLAS sgemm {sg / 1e9:.1f} GFLOP/s", f"{g / sg:.3f}×", "—"))

ral = medians("ral_bench")
rc, pc = ral["BM_RalCallWarm"]["ns"], ral["BM_PlainIndirectCall"]["ns"]
rows.append(("warm RAL call from compiled code (empty registered function)", f"{rc:.1f} ns",
             f"plain indirect call {pc:.1f} ns", f"{rc / pc:.1f}×", "≤ 50 ns"))

print("| measurement | kiln (median) | baseline, same run | ratio | target |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
