"""Import ONNX models into kiln (docs/onnx.md).

    import kiln.onnx
    run = kiln.onnx.compile("model.onnx", device="cpu")
    outputs = run(input=batch)                  # {ONNX output name: ndarray}

    program = kiln.onnx.import_model("model.onnx")   # a kiln.Program: its text, its params' values
    python -m kiln.onnx model.onnx -o DIR            # DIR/model.kiln and DIR/params/*.npy for `kiln run`

Needs the `onnx` package (`pip install ".[onnx]"`). A model kiln cannot import raises
OnnxImportError (a ValueError) naming the node, its operator and why.
"""

import importlib.util

if importlib.util.find_spec("onnx") is None:
    raise ImportError("kiln.onnx needs the onnx package: pip install onnx, or install kiln with the extra "
                      "kiln[onnx]")

from ._graph import OnnxImportError  # noqa: E402
from ._importer import import_model, import_text  # noqa: E402

__all__ = ["OnnxImportError", "import_model", "import_text", "compile", "CompiledModel"]


class CompiledModel:
    """An imported model compiled for a device, called like onnxruntime's InferenceSession.run:
    with the ONNX inputs by name (NumPy arrays or DLPack tensors), it returns the ONNX outputs
    by name. Threads: calls run one after another (kiln.CompiledProgram's rule)."""

    def __init__(self, program, device="cpu", **options):
        self.program = program
        # The weights once: the compiled program binds the program's arrays (on cpu and interp)
        # rather than copies; no routine of an imported model writes them.
        self._compiled = program.compile(device=device, share_params=True, **options)
        roles = program.tensors
        self._inputs = {n: k for n, k in program.onnx_names.items() if roles.get(k, ("",))[0] == "input"}
        self._outputs = dict(program.onnx_outputs)
        self.inputs, self.outputs = list(self._inputs), list(self._outputs)

    def __call__(self, **inputs):
        unknown = sorted(set(inputs) - set(self._inputs))
        if unknown:
            raise ValueError(f"the model has no input {unknown[0]!r}; its inputs are {self.inputs}")
        results = self._compiled(**{self._inputs[n]: v for n, v in inputs.items()})
        return {n: results[k] for n, k in self._outputs.items()}


def compile(model, device="cpu", sizes=None, **options):
    """import_model(model, sizes), compiled for `device` (options as kiln.Program.compile)."""
    return CompiledModel(import_model(model, sizes), device, **options)
