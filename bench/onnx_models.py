"""kiln.onnx against ONNX Runtime on the architectures the `onnx` wheel ships with constant
weights (onnx/backend/test/data/light): import and compile times, the median of 5 runs after
one at batch 1 on cpu (KILN_CPU_THREADS threads, 2 by default) and ONNX Runtime's with as many
intra-op threads, in the same process, and the largest difference relative to ONNX Runtime's
largest output. Prints the table of docs/onnx.md.

    build/python-venv/bin/python bench/onnx_models.py --build build [MODEL ...]
"""

import argparse
import os
import sys
import time


def median_ms(fn, runs=5):
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the build folder whose python/ holds kiln")
    parser.add_argument("models", nargs="*", help="light model names (default: every one)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    threads = int(os.environ.setdefault("KILN_CPU_THREADS", "2"))
    import numpy as np
    import onnx
    import onnxruntime as ort

    import kiln.onnx

    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    names = args.models or sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(light) if f.endswith(".onnx"))
    print("| model | import / compile | kiln | ONNX Runtime | ratio | largest difference |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in names:
        path = os.path.join(light, f"light_{name}.onnx")
        model = onnx.load(path)
        initializers = {t.name for t in model.graph.initializer}
        (inp,) = [i for i in model.graph.input if i.name not in initializers]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds = {inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        try:
            start = time.perf_counter()
            program = kiln.onnx.import_model(model)
            imported = time.perf_counter()
            run = kiln.onnx.CompiledModel(program, "cpu")
            compiled = time.perf_counter()
        except kiln.onnx.OnnxImportError as e:
            print(f"| {name} | refused: {e} | | | | |")
            continue
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        got, want = run(**feeds), session.run(None, feeds)
        difference = max(float(np.abs(got[o.name] - w).max() / max(1e-30, float(np.abs(w).max())))
                         for o, w in zip(model.graph.output, want))
        kiln_ms = median_ms(lambda: run(**feeds))
        ort_ms = median_ms(lambda: session.run(None, feeds))
        print(f"| {name} | {imported - start:.2f} s / {compiled - imported:.2f} s | {kiln_ms:.1f} ms | "
              f"{ort_ms:.1f} ms | {kiln_ms / ort_ms:.1f}× | {difference:.1e} |", flush=True)


if __name__ == "__main__":
    main()
