"""The importer's model of an ONNX graph: values (ONNX tensors) with their kiln names, types and
shapes, the statements written for them, and the declarations they make (docs/onnx.md)."""

import keyword
import re

import numpy as np
from onnx import TensorProto

from .. import Program


class OnnxImportError(ValueError):
    """A model kiln cannot import: the message names the node, its operator and why."""


# ONNX element types -> kiln's, and kiln's -> NumPy's (bf16 as its 16 bits where ml_dtypes is
# missing, as kiln's Python package does).
KILN_TYPES = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.INT8: "i8", TensorProto.UINT8: "u8",
    TensorProto.INT16: "i16", TensorProto.UINT16: "u16", TensorProto.INT32: "i32",
    TensorProto.UINT32: "u32", TensorProto.INT64: "i64", TensorProto.UINT64: "u64",
    TensorProto.BOOL: "bool",
}


def numpy_type(kiln_type):
    if kiln_type == "bf16":
        try:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return np.dtype(np.uint16)
    return np.dtype({"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "u8": np.uint8,
                     "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
                     "u64": np.uint64, "bool": np.bool_}[kiln_type])


def kiln_type_of(array):
    """kiln's name of a NumPy array's element type."""
    name = array.dtype.name
    table = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int8": "i8",
             "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32",
             "int64": "i64", "uint64": "u64", "bool": "bool"}
    if name not in table:
        raise OnnxImportError(f"a constant of type {name}, which kiln has not")
    return table[name]


FLOAT_TYPES = ("f16", "bf16", "f32", "f64")

# Names a kiln tensor cannot take: the language's keywords, its functions and types, and the
# names the importer gives indices (i0, r0, ...).
_RESERVED = {
    "input", "output", "param", "tensor", "const", "routine", "where", "call", "true", "false", "size",
    "inf", "nan", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf", "relu", "abs",
    "floor", "ceil", "max", "min", "pow", "select", "sum", "prod", "mean", "argmax", "argmin", "main",
    "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64",
}
_INDEX = re.compile(r"^[ir][0-9]+$")


class Value:
    """One ONNX tensor: its kiln name, element type, shape (ints, or strings naming sizes), and
    its value where the importer knows it (initializers, constants, folded shape arithmetic)."""

    def __init__(self, name, dtype, shape, const=None):
        self.name, self.dtype, self.shape, self.const = name, dtype, tuple(shape), const
        self.kname = None  # given when a statement or declaration first needs it
        # A reshape that no statement computes: (x, the dimensions of x merged into this
        # value's last), read through x by the one operator that takes it (Gemm).
        self.view = None
        # A transpose that only a MatMul reads as its right operand, stored with its last two
        # dimensions swapped ([..., J, K]), which the product reads transposed (gemm's
        # transpose_b): the tensor so stored (the input itself where that is its order).
        self.transposed = None
        # Where the ONNX shape has a dimension that is a product of sizes ("seq*batch"), which no
        # declaration can have: that shape, `shape` being the one declared, each such dimension
        # as its sizes (_dims.factors). Read only by the operators that know (Reshape, Gemm).
        self.product_shape = None
        # The same tensor in blocks of 16 channels ([N, ceil(C/16), H, W, 16], conv2d_blocked's
        # data), where a convolution wrote it so: then this value, [N, C, H, W], is declared and
        # computed from it only when a statement first reads it (Graph.ref).
        self.blocked = None

    @property
    def rank(self):
        return len(self.shape)

    @property
    def onnx_shape(self):
        """The shape ONNX sees (Shape's result): `shape` but for a product of sizes."""
        return self.product_shape if self.product_shape is not None else self.shape

    @property
    def declared_tail(self):
        """How many trailing dimensions are declared as ONNX has them (all, without a product):
        those after the last that a Reshape declared as its parts."""
        if self.product_shape is None:
            return self.rank
        k = 0
        while k < min(self.rank, len(self.product_shape)) and self.shape[-1 - k] == self.product_shape[-1 - k]:
            k += 1
        return k


class Graph:
    """What the importer has built so far: names, declarations and statements."""

    def __init__(self):
        self.names = {}        # ONNX name -> kiln name
        self.outputs = {}      # the graph's outputs: ONNX name -> the kiln output holding it
        self.taken = set()
        self.sizes = []        # kiln size names, in order
        self.statements = []
        self.declared = {}     # kiln name -> (role, Value)
        self.order = []        # kiln names in declaration order
        self._temporaries = 0
        # unblock(value): declares a value held only in blocks (Value.blocked) and writes the
        # statement computing it (the importer's, which knows the index tables).
        self.unblock = None

    def kiln_name(self, onnx_name):
        """The kiln identifier for an ONNX name: the same where it is one, else a mapped one
        (invalid characters as '_', a prefix before a digit or a reserved word, a number where
        two names would meet), kept in `names` so that the mapping can be reversed."""
        if onnx_name in self.names:
            return self.names[onnx_name]
        base = re.sub(r"[^A-Za-z0-9_]", "_", onnx_name) or "t"
        if base[0].isdigit() or base in _RESERVED or _INDEX.match(base) or keyword.iskeyword(base):
            base = "t_" + base
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        self.names[onnx_name] = name
        return name

    def temporary(self, dtype, shape, hint="tmp"):
        """A new intermediate tensor of the importer's own."""
        self._temporaries += 1
        value = Value(f"kiln_{hint}_{self._temporaries}", dtype, shape)
        self.declare("tensor", value)
        return value

    def declare(self, role, value):
        if value.kname is None:
            value.kname = self.kiln_name(value.name)
        if value.kname not in self.declared:
            self.declared[value.kname] = (role, value)
            self.order.append(value.kname)
        return value.kname

    def ref(self, value):
        """The kiln name of `value` for a statement that reads it: a known value that no
        statement has read yet becomes a param with that value; one held only in blocks of
        channels is computed from them first."""
        if value.blocked is not None and (value.kname is None or value.kname not in self.declared):
            self.unblock(value)
        elif value.kname is None or value.kname not in self.declared:
            self.declare("param" if value.const is not None else "tensor", value)
        return value.kname

    def emit(self, text):
        self.statements.append(text)

    def program_text(self, source_name):
        lines = [f"# Imported from {source_name} by kiln.onnx (docs/onnx.md)."]
        lines += [f"size {s}" for s in self.sizes]
        for kname in self.order:
            role, value = self.declared[kname]
            dims = ", ".join(str(d) for d in value.shape)
            lines.append(f"{role} {kname} : {value.dtype}[{dims}]")
        lines += self.statements
        return "\n".join(lines) + "\n"

    def make_program(self, source_name):
        text = self.program_text(source_name)
        program = Program.from_text(text, source_name + ".kiln")
        for kname in self.order:
            role, value = self.declared[kname]
            if role == "param":
                array = np.ascontiguousarray(value.const, dtype=numpy_type(value.dtype)).reshape(value.shape)
                # Writable, so that the compiled program binds it rather than a copy (an
                # initializer's array is a read-only view of the model's bytes).
                program.set_param_value(kname, array if array.flags.writeable else array.copy())
        program.onnx_names = dict(self.names)
        program.onnx_outputs = dict(self.outputs)
        return program, text
