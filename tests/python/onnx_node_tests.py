"""The ONNX backend's node tests (Debian's libonnx-testdata: data/node, pytorch-converted,
pytorch-operator) through kiln.onnx, against the outputs they ship.

    python tests/python/onnx_node_tests.py [--device interp] [--markdown]

Each test is one of: passed (every output within ONNX's backend tolerance, rtol 1e-3 and atol
1e-7, NaNs where the expected has them), refused (OnnxImportError: an operator or attribute
kiln does not take; or test data of other shapes than its model declares), outdated (expected
outputs that the `onnx` package's own reference implementation now contradicts, listed in
OUTDATED), or failed (a wrong result, or any other error). tests/python/
test_onnx_node_tests.py runs it in `make test` and allows no failure; `--markdown` prints the
coverage table of docs/onnx.md.
"""

import argparse
import collections
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import kiln.onnx

ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ("node", "pytorch-converted", "pytorch-operator")

# Tests whose expected outputs predate a fix in ONNX: Debian's data is onnx 1.12's.
OUTDATED = {
    "node/test_cast_FLOAT_to_BFLOAT16": "its outputs truncate to bf16; ONNX's reference implementation (1.23) and "
                                        "kiln round to nearest even (0.48033667 -> bits 16118, the data says 16117)",
}


def tensor(path):
    proto = onnx.TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)


def close(got, want):
    if got.shape != want.shape:
        return False
    if got.dtype.name == "bfloat16" or want.dtype.name == "bfloat16":
        # bf16 as its bits on either side (onnx reads bfloat16 data as uint16), compared as values.
        def values(a):
            bits = a.view(np.uint16) if a.dtype.itemsize == 2 else None
            return (bits.astype(np.uint32) << 16).view(np.float32) if bits is not None else a.astype(np.float32)
        got, want = values(got), values(want)
    if want.dtype.kind in "fc":
        got, want = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(want)
        if not np.array_equal(nan, np.isnan(got)):
            return False
        g, w = got[~nan], want[~nan]
        with np.errstate(invalid="ignore"):  # inf - inf: equal infinities pass by the first test
            return bool(np.all((g == w) | (np.abs(g - w) <= 1e-7 + 1e-3 * np.abs(w))))
    return np.array_equal(got, want.astype(got.dtype) if want.dtype != got.dtype else want)


def run_one(folder, device):
    """("passed" | "refused" | "failed", the operators of the model, why)."""
    model = onnx.load(os.path.join(folder, "model.onnx"))
    ops = sorted({n.op_type for n in model.graph.node})
    sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    if not sets:
        return "refused", ops, "no test data"
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    try:
        run = kiln.onnx.compile(model, device=device)
    except kiln.onnx.OnnxImportError as e:
        return "refused", ops, str(e).split(": ", 1)[-1]
    except Exception as e:  # a program kiln's own checks refuse, or a crash of the importer
        return "failed", ops, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    for data in sets:
        try:
            feeds = {name: tensor(os.path.join(data, f"input_{i}.pb")) for i, name in enumerate(inputs)}
            want = [tensor(os.path.join(data, f"output_{i}.pb")) for i in range(len(outputs))]
        except Exception as e:  # sequences, optionals: not tensors
            return "refused", ops, f"test data that is not tensors ({type(e).__name__})"
        declared = {i.name: [d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim]
                    for i in model.graph.input}
        for name, value in feeds.items():
            dims = declared.get(name)
            if dims is not None and (len(dims) != value.ndim or any(d is not None and d != v
                                                                    for d, v in zip(dims, value.shape))):
                return "refused", ops, f"its test data's '{name}' is {list(value.shape)}, the model declares {dims}"
        try:
            got = run(**feeds)
        except Exception as e:
            return "failed", ops, f"running: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        for name, w in zip(outputs, want):
            if not close(np.asarray(got[name]), w):
                return "failed", ops, f"output '{name}' differs"
    return "passed", ops, ""


def run_all(device="interp", root=ROOT, suites=SUITES, names=None):
    results = {}
    for suite in suites:
        for folder in sorted(glob.glob(os.path.join(root, suite, "*"))):
            name = f"{suite}/{os.path.basename(folder)}"
            if names and not any(n in name for n in names):
                continue
            status, ops, why = run_one(folder, device)
            if status == "failed" and name in OUTDATED:
                status, why = "outdated", OUTDATED[name]
            results[name] = (status, ops, why)
    return results


def markdown(results):
    by_op = collections.defaultdict(collections.Counter)
    for status, ops, _ in results.values():
        for op in ops:
            by_op[op][status] += 1
    total = collections.Counter(status for status, _, _ in results.values())
    lines = [f"{total['passed']} passed, {total['refused']} refused, {total['outdated']} outdated, "
             f"{total['failed']} failed of {len(results)} tests.", "",
             "| operator | passed | refused | outdated | failed |", "| --- | --- | --- | --- | --- |"]
    for op in sorted(by_op):
        c = by_op[op]
        lines.append(f"| `{op}` | {c['passed']} | {c['refused']} | {c['outdated']} | {c['failed']} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="interp")
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--markdown", action="store_true", help="print the coverage table by operator")
    parser.add_argument("names", nargs="*", help="only the tests whose name contains one of these")
    args = parser.parse_args()
    results = run_all(args.device, args.root, names=args.names)
    for name, (status, ops, why) in sorted(results.items()):
        if status != "passed" or not args.markdown:
            print(f"{status:8} {name} ({', '.join(ops)}) {why}")
    if args.markdown:
        print(markdown(results))
    return 1 if any(s == "failed" for s, _, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
