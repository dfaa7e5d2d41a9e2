"""Exports models to ONNX with PyTorch, random weights (seeded): torchvision's ResNet-18,
MobileNet-V2 and SqueezeNet-1.1 (a dynamic batch), and a GPT-style decoder (a dynamic batch and
sequence), also with bf16 weights and activations ("gpt_bf16", which ONNX Runtime does not run on
the CPU: beside it, NAME.reference.npz holds PyTorch's outputs for a batch of tokens). For
classify.py beside it, the ONNX importer's tests (tests/python/test_onnx.py) and
its benchmark (bench/onnx_models.py).

Runs under an interpreter with PyTorch and torchvision (Debian's python3-torch and
python3-torchvision, which `make test` and `make demo` install for the interpreter the build's
virtual environment was made from; the environment itself has neither):

    python3 examples/onnx/export_models.py DIR [--size 224] [--models resnet18,...]

writes DIR/NAME.onnx for each model and prints its path. The torchvision models take "input"
[batch, 3, size, size] and give "logits" [batch, 1000]; they are in eval mode, so the exporter
folds BatchNormalization into the convolutions, as for a deployed model. "resnet50" (torchvision's ResNet-50, for bench/peers) is written
only when asked for. "gpt" takes "tokens"
(int64) [batch, seq] and gives "logits" [batch, seq, 512]: token and position embeddings, 2
blocks of causal self-attention (4 heads, width 128, the mask a slice of a buffer, as nanoGPT
writes it) and a GELU MLP, each after a LayerNorm, then a LayerNorm and the head; at most 64
positions. "encoder" is torch.nn.TransformerEncoder: 2 layers of width 256, 4 heads, a ReLU MLP of
1024, batch first; it takes "input" [batch, seq, 256] and gives "output" of the same shape, both
dimensions dynamic (its attention's seq * batch rows are declared [seq, batch, 256], docs/onnx.md).
"""

import argparse
import math
import os
import subprocess
import sys

TORCHVISION = ("resnet18", "mobilenet_v2", "squeezenet1_1")
# torchvision's ResNet-50 too, for `make bench-peers`' rows (bench/peers), not by default.
MODELS = TORCHVISION + ("resnet50", "gpt", "gpt_bf16", "encoder")


def gpt_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, width, heads, positions):
            super().__init__()
            self.heads = heads
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.register_buffer("mask", torch.tril(torch.ones(positions, positions)).view(1, 1, positions, positions))

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
            att = F.softmax(att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")), dim=-1)
            return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self, width, heads, positions):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attention = Attention(width, heads, positions)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class Gpt(nn.Module):
        def __init__(self, vocabulary=512, positions=64, layers=2, heads=4, width=128):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(vocabulary, width), nn.Embedding(positions, width)
            self.blocks = nn.ModuleList([Block(width, heads, positions) for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocabulary, bias=False)

        def forward(self, tokens):
            t = tokens.size(1)
            x = self.tokens(tokens) + self.positions(torch.arange(0, t, dtype=torch.long))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return Gpt()


def model_of(torch, torchvision, name, size=224):
    """The PyTorch module `name` in eval mode, its weights random from seed 0, with an example
    input, the input's name and the dynamic axes of its input and output (the ONNX export's
    arguments). bench/peers runs these modules eagerly beside the exported files."""
    torch.manual_seed(0)
    if name.startswith("gpt"):
        model, example = gpt_model(torch).eval(), torch.randint(0, 512, (2, 16))
        names, axes = ["tokens"], {"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
        if name == "gpt_bf16":
            model = model.to(torch.bfloat16)
    elif name == "encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
        model, example = torch.nn.TransformerEncoder(layer, num_layers=2).eval(), torch.randn(2, 16, 256)
        names, axes = ["input"], {"input": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}}
    else:
        model, example = getattr(torchvision.models, name)(weights=None).eval(), torch.randn(2, 3, size, size)
        names, axes = ["input"], {"input": {0: "batch"}, "logits": {0: "batch"}}
    return model, example, names, axes


def export(torch, torchvision, name, size, path):
    model, example, names, axes = model_of(torch, torchvision, name, size)
    if name == "gpt_bf16":
        reference_outputs(torch, model, path[:-len(".onnx")] + ".reference.npz")
    output = "output" if name == "encoder" else "logits"
    # The encoder is exported with gradients enabled: without them PyTorch 1.13's eval-mode
    # TransformerEncoderLayer takes its fused fast path, an operator ONNX does not have.
    with torch.set_grad_enabled(name == "encoder"):
        torch.onnx.export(model, example, path + ".part", input_names=names, output_names=[output],
                          dynamic_axes=axes, opset_version=13)
    os.replace(path + ".part", path)


def reference_outputs(torch, model, path):
    """What PyTorch computes for the bf16 model, which ONNX Runtime does not run on the CPU:
    tokens (2 x 16), and the logits with its bf16 weights computed in f32 ("f32") and in bf16 as
    eager PyTorch rounds every operation ("bf16")."""
    import copy

    import numpy as np
    tokens = torch.from_numpy(np.random.default_rng(1).integers(0, 512, (2, 16)).astype(np.int64))
    with torch.no_grad():
        wide = copy.deepcopy(model).float()
        np.savez(path, tokens=tokens.numpy(), f32=wide(tokens).numpy(), bf16=model(tokens).float().numpy())


def base_python():
    """The interpreter the running virtual environment was made from, where Debian's PyTorch and
    torchvision live (itself outside an environment)."""
    return os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2])


def export_with_base_python(folder, models, size=None):
    """Runs this script under base_python() for `models` into `folder` and returns the paths it
    wrote; RuntimeError with its message where it fails. For callers inside the environment,
    which has no PyTorch."""
    command = [base_python(), os.path.abspath(__file__), folder, "--models", ",".join(models)]
    done = subprocess.run(command + (["--size", str(size)] if size else []), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"exporting {', '.join(models)} failed:\n{done.stderr.strip()}")
    return done.stdout.split()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="the folder to write NAME.onnx into")
    parser.add_argument("--size", type=int, default=224, help="the torchvision models' image height and width")
    parser.add_argument("--models", default=",".join(TORCHVISION), help=f"comma-separated, of {', '.join(MODELS)} "
                        "(default: the torchvision ones)")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"export_models.py: unknown model {unknown[0]!r}; the models are {', '.join(MODELS)}")
    try:
        import torch
        import torchvision
    except ImportError as e:
        sys.exit(f"export_models.py: {sys.executable} has no {e.name}; install Debian's python3-torch "
                 "and python3-torchvision")
    os.makedirs(args.dir, exist_ok=True)
    for name in names:
        path = os.path.join(args.dir, f"{name}.onnx")
        export(torch, torchvision, name, args.size, path)
        print(path)


if __name__ == "__main__":
    main()
