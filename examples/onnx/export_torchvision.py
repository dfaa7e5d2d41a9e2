"""Exports torchvision's ResNet-18, MobileNet-V2 and SqueezeNet-1.1 to ONNX with random weights
(seeded) and a dynamic batch: for classify.py beside it, the ONNX importer's tests
(tests/python/test_onnx.py) and its benchmark (bench/onnx_models.py).

Runs under an interpreter with PyTorch and torchvision (Debian's python3-torch and
python3-torchvision, which `make test` installs for the interpreter the build's virtual
environment was made from; the environment itself has neither):

    python3 examples/onnx/export_torchvision.py DIR [--size 224] [--models resnet18,...]

writes DIR/NAME.onnx for each model, with input "input" [batch, 3, size, size] and output
"logits" [batch, 1000]. The models are in eval mode, so BatchNormalization is folded into the
convolutions by the exporter, as it is for a deployed model.
"""

import argparse
import os
import sys

MODELS = ("resnet18", "mobilenet_v2", "squeezenet1_1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the folder to write NAME.onnx into")
    parser.add_argument("--size", type=int, default=224, help="the images' height and width")
    parser.add_argument("--models", default=",".join(MODELS), help="which models, comma-separated")
    args = parser.parse_args()
    try:
        import torch
        import torchvision
    except ImportError as e:
        sys.exit(f"export_torchvision.py: {sys.executable} has no {e.name}; install Debian's python3-torch "
                 "and python3-torchvision")
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"export_torchvision.py: unknown model {unknown[0]!r}; the models are {', '.join(MODELS)}")
    os.makedirs(args.dir, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(2, 3, args.size, args.size)
        path = os.path.join(args.dir, f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, x, path + ".part", input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
        os.replace(path + ".part", path)
        print(path)


if __name__ == "__main__":
    main()
