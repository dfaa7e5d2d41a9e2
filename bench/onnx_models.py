"""kiln.onnx against ONNX Runtime on real architectures: the nine the `onnx` wheel ships with
constant weights (onnx/backend/test/data/light, batch 1), and with --torchvision torchvision's
ResNet-18, MobileNet-V2 and SqueezeNet-1.1 and the GPT-style decoder (random weights, exported by
examples/onnx/export_models.py under an interpreter with PyTorch) at each --batches (the
decoder's sequences 64 tokens long), and torch.nn.TransformerEncoder at batch 8 of 128 tokens
(imported with those sizes given, which runs faster than its program with sizes). For
each: import and compile times, the median of --runs runs (11) after 24 on cpu (KILN_CPU_THREADS
threads, 2 by default) and ONNX Runtime's with as many intra-op threads, in the same process
but each timed alone (kiln first, then ONNX Runtime's session is made and timed),
and the largest difference relative to ONNX Runtime's largest output; with --peak-memory, the
peak resident memory of a process that loads the model and runs it once, kiln's against ONNX
Runtime's. Prints the tables of docs/onnx.md.

    build/python-venv/bin/python bench/onnx_models.py --build build [MODEL ...]
    build/python-venv/bin/python bench/onnx_models.py --build build --torchvision [--batches 1,16]
    build/python-venv/bin/python bench/onnx_models.py --build build [--torchvision] --peak-memory
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GPT_SEQUENCE = 64  # the GPT-style decoder's tokens per sequence: all the positions it has
ENCODER_SEQUENCE, ENCODER_BATCH = 128, 8  # the transformer encoder's row (the shape)


# Runs before the timed ones, for both: the cpu device chooses per kernel whether its workgroups
# share the thread pool by timing its first 23 dispatches (docs/hal.md), and ONNX Runtime's first
# runs set up its own state; the tables show each one's steady runs.
WARMUP_RUNS = 24


def median_ms(fn, runs):
    for _ in range(WARMUP_RUNS):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def light_models(onnx, names):
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    names = names or sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(light) if f.endswith(".onnx"))
    return [(name, os.path.join(light, f"light_{name}.onnx"), None) for name in names]


def exported_models(folder, names, batches):
    """Exports the models with the interpreter this environment was made from (Debian's
    python3-torch and python3-torchvision live there, not here)."""
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "onnx"))
    from export_models import export_with_base_python
    exported = export_with_base_python(folder, names or ["resnet18", "mobilenet_v2", "squeezenet1_1", "gpt", "encoder"])
    cases = []
    for path in exported:
        name = os.path.basename(path)[:-len(".onnx")]
        cases += [(name, path, b) for b in ([ENCODER_BATCH] if name == "encoder" else batches)]
    return cases


def feeds_for(np, onnx, model, batch):
    """Random inputs for the model's one input: images, or the GPT-style decoder's tokens."""
    initializers = {t.name for t in model.graph.initializer}
    (inp,) = [i for i in model.graph.input if i.name not in initializers]
    rng = np.random.default_rng(0)
    if inp.type.tensor_type.elem_type == onnx.TensorProto.INT64:
        return {inp.name: rng.integers(0, 512, [batch, GPT_SEQUENCE]).astype(np.int64)}
    shape = [d.dim_value if d.HasField("dim_value") else ENCODER_SEQUENCE if d.dim_param == "seq" else batch
             for d in inp.type.tensor_type.shape.dim]
    return {inp.name: rng.standard_normal(shape).astype(np.float32)}


def sizes_for(name, model, feeds):
    """The sizes to import `name` with: none (every dimension stays a size) except for the
    encoder, whose named dimensions take the feeds' extents (the issue's row is one shape; with
    its batch and sequence sizes it runs about 12% slower, docs/onnx.md)."""
    if name != "encoder":
        return None
    sizes = {}
    for inp in model.graph.input:
        for d, extent in zip(inp.type.tensor_type.shape.dim, feeds[inp.name].shape if inp.name in feeds else ()):
            if d.dim_param:
                sizes[d.dim_param] = int(extent)
    return sizes


def peak_kib(build, who, path, batch):
    """The peak resident memory (ru_maxrss) of a process that loads the model with `who` (kiln
    or ort) and runs it once: a process of its own, so that neither counts the other's."""
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--build", build, "--measure-peak", who,
                           path, str(batch or 0)], check=True, capture_output=True, text=True)
    return int(done.stdout.split()[-1])


def measure_peak(who, path, batch):
    import resource

    import numpy as np
    import onnx
    model = onnx.load(path)
    feeds = feeds_for(np, onnx, model, batch or None)
    if who == "kiln":
        import kiln.onnx
        name = os.path.basename(path)[:-len(".onnx")]
        kiln.onnx.compile(model, "cpu", sizes=sizes_for(name, model, feeds))(**feeds)
    else:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ["KILN_CPU_THREADS"])
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the build folder whose python/ holds kiln")
    parser.add_argument("--torchvision", action="store_true",
                        help="the models PyTorch exports (torchvision's, the GPT-style decoder) instead of the light ones")
    parser.add_argument("--runs", type=int, default=11, help="timed runs of each, after 24 (the median is shown)")
    parser.add_argument("--batches", default="1,16", help="--torchvision's batch sizes (comma-separated)")
    parser.add_argument("--peak-memory", action="store_true",
                        help="instead of times, each one's peak resident memory with the model loaded and run once")
    parser.add_argument("--measure-peak", nargs=3, metavar=("WHO", "MODEL", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument("models", nargs="*", help="model names (default: every one)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    threads = int(os.environ.setdefault("KILN_CPU_THREADS", "2"))
    if args.measure_peak:
        who, path, batch = args.measure_peak
        return measure_peak(who, path, int(batch))
    import numpy as np
    import onnx
    import onnxruntime as ort

    import kiln.onnx

    folder = tempfile.TemporaryDirectory()
    cases = (exported_models(folder.name, args.models, [int(b) for b in args.batches.split(",")])
             if args.torchvision else light_models(onnx, args.models))
    if args.peak_memory:
        print("| model | batch | kiln's peak memory | ONNX Runtime's | ratio |")
        print("| --- | --- | --- | --- | --- |")
        for name, path, batch in cases:
            peaks = [peak_kib(args.build, who, path, batch) for who in ("kiln", "ort")]
            print(f"| {name} | {batch or 1} | {peaks[0] / 1024:.0f} MiB | {peaks[1] / 1024:.0f} MiB | "
                  f"{peaks[0] / peaks[1]:.2f}× |", flush=True)
        return
    print("| model | batch | import / compile | kiln | ONNX Runtime | ratio | largest difference |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, path, batch in cases:
        model = onnx.load(path)
        feeds = feeds_for(np, onnx, model, batch)
        shape = next(iter(feeds.values())).shape
        try:
            start = time.perf_counter()
            program = kiln.onnx.import_model(model, sizes_for(name, model, feeds))
            imported = time.perf_counter()
            run = kiln.onnx.CompiledModel(program, "cpu")
            compiled = time.perf_counter()
        except kiln.onnx.OnnxImportError as e:
            print(f"| {name} | {shape[0]} | refused: {e} | | | | |")
            continue
        # Each is timed alone, kiln first, with a pause between: ONNX Runtime's idle threads spin
        # after each of its runs (and kiln's briefly after its own), so runs that alternate in one
        # process take each other's cores (kiln's ResNet-50 took 62 ms against 48 alone).
        got = run(**feeds)
        kiln_ms = median_ms(lambda: run(**feeds), args.runs)
        time.sleep(0.5)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
        ort_ms = median_ms(lambda: session.run(None, feeds), args.runs)
        difference = max(float(np.abs(got[o.name] - w).max() / max(1e-30, float(np.abs(w).max())))
                         for o, w in zip(model.graph.output, want))
        del session
        time.sleep(0.5)
        print(f"| {name} | {shape[0]} | {imported - start:.2f} s / {compiled - imported:.2f} s | {kiln_ms:.1f} ms | "
              f"{ort_ms:.1f} ms | {kiln_ms / ort_ms:.1f}× | {difference:.1e} |", flush=True)


if __name__ == "__main__":
    main()
