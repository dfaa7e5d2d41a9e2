#!/usr/bin/env python3
"""Classifies a batch of images with a torchvision model exported to ONNX, on kiln and on ONNX
Runtime, and prints both top-5s side by side.

    classify.py [--model resnet18|mobilenet_v2|squeezenet1_1] [--onnx MODEL.onnx] [--batch N]
                [--device cpu|interp|opencl] [--seed N]

Without --onnx the model is exported first by export_models.py beside this file, with
random weights (seeded: this machine cannot download torchvision's trained ones), under the
interpreter this environment was made from, which has Debian's python3-torch and
python3-torchvision (`make demo` installs them). The images are random too, normalized as
torchvision's models expect; so the classes are meaningless, and what the example shows is the
three lines that run an ONNX model on kiln, and that kiln and ONNX Runtime agree. With --onnx
it runs your own model (input [batch, 3, H, W], one output of class scores).
"""

import argparse
import sys
import tempfile
import time

import numpy as np

import kiln.onnx
from export_models import export_with_base_python


def top5(scores):
    best = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    return best, np.take_along_axis(scores, best, axis=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", help="a torchvision model to export (default resnet18)")
    parser.add_argument("--onnx", help="an ONNX model to run instead of exporting one")
    parser.add_argument("--batch", type=int, default=4, help="images in the batch (default 4)")
    parser.add_argument("--device", default="cpu", help="kiln's device (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the images")
    args = parser.parse_args()
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        try:
            path = args.onnx or export_with_base_python(folder, [args.model])[0]
        except RuntimeError as e:
            sys.exit(f"classify.py: {e}")
        model = onnx.load(path)
        initializers = {t.name for t in model.graph.initializer}
        (inp,) = [i for i in model.graph.input if i.name not in initializers]
        height, width = (d.dim_value for d in inp.type.tensor_type.shape.dim[2:])
        rng = np.random.default_rng(args.seed)
        images = rng.random((args.batch, 3, height, width), dtype=np.float32)
        mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
        std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
        batch = (images - mean) / std

        start = time.perf_counter()
        run = kiln.onnx.compile(model, device=args.device)  # import, then compile (or the disk cache)
        compiled = time.perf_counter()
        ours = run(**{inp.name: batch})[model.graph.output[0].name]
        ran = time.perf_counter()
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        theirs = session.run(None, {inp.name: batch})[0]

    name = args.onnx or args.model
    print(f"{name} on kiln's {args.device} (import + compile {compiled - start:.2f} s, first run "
          f"{(ran - compiled) * 1e3:.1f} ms) and on ONNX Runtime {ort.__version__}:")
    (k_cls, k_score), (o_cls, o_score) = top5(ours), top5(theirs)
    print(f"{'image':>5}  {'kiln top-5 (class: score)':<58}  ONNX Runtime top-5")
    for i in range(args.batch):
        k = "  ".join(f"{c:3d}: {s:6.2f}" for c, s in zip(k_cls[i], k_score[i]))
        o = "  ".join(f"{c:3d}: {s:6.2f}" for c, s in zip(o_cls[i], o_score[i]))
        print(f"{i:>5}  {k:<58}  {o}")
    scale = max(1e-30, float(np.abs(theirs).max()))
    difference = float(np.abs(ours - theirs).max()) / scale
    # Classes whose scores tie within rounding may come in either order.
    same_scores = bool(np.all(np.abs(k_score - o_score) <= 1e-4 * scale))
    agreement = ("identical" if (k_cls == o_cls).all() else
                 "the same up to ties in rounding" if same_scores else "DIFFERENT")
    print(f"largest difference {difference:.1e} of the largest score; top-5s {agreement}")
    if difference > 1e-4 or not same_scores:
        sys.exit(1)


if __name__ == "__main__":
    main()
