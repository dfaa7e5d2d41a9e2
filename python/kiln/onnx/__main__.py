"""python -m kiln.onnx MODEL.onnx -o DIR: the model as DIR/model.kiln and its params' values as
DIR/params/NAME.npy, for `kiln run --params DIR/params` and the C API (docs/onnx.md). Prints the
command that runs it. Nothing is written when the import fails."""

import argparse
import os
import shlex
import shutil
import sys
import tempfile

import numpy as np

from . import OnnxImportError, import_text


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln.onnx", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("-o", "--output", required=True, help="the folder to write (made if missing)")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                        help="give a named dimension a fixed extent; repeatable")
    args = parser.parse_args(argv)
    sizes = {}
    for item in args.size:
        name, _, value = item.partition("=")
        if not name or not value.isdigit() or int(value) < 1:
            parser.error(f"--size {item}: expected NAME=VALUE with VALUE a positive integer")
        sizes[name] = int(value)
    try:
        program, text = import_text(args.model, sizes)
    except (OnnxImportError, FileNotFoundError) as e:
        print(f"python -m kiln.onnx: {e}", file=sys.stderr)
        return 1
    # Everything is written into a fresh folder beside the destination, then moved into place:
    # a failure leaves no half-written model.
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".kiln-onnx-", dir=os.path.dirname(os.path.abspath(args.output)))
    os.makedirs(os.path.join(staging, "params"))
    with open(os.path.join(staging, "model.kiln"), "w") as f:
        f.write(text)
    values = program.param_values
    for name, value in values.items():
        np.save(os.path.join(staging, "params", name + ".npy"), value)
    if os.path.exists(args.output):
        if not os.path.isdir(args.output) or os.listdir(args.output):
            print(f"python -m kiln.onnx: {args.output} exists and is not an empty folder", file=sys.stderr)
            shutil.rmtree(staging)
            return 1
        os.rmdir(args.output)
    os.rename(staging, args.output)
    print(f"wrote {os.path.join(args.output, 'model.kiln')} and {len(values)} params; run it with:")
    print(f"kiln run {shlex.quote(os.path.join(args.output, 'model.kiln'))} "
          f"--params {shlex.quote(os.path.join(args.output, 'params'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
