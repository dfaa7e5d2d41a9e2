"""Writing kiln statements for ONNX nodes: the operator registry (OPS, filled by `_ops.py`,
`_conv.py` and `_movement.py`) and the helpers every operator uses to read, write and broadcast
its tensors (docs/onnx.md)."""

import math

from ._graph import FLOAT_TYPES

OPS = {}


# The operators whose handlers are `elementwise` (below): they may read a tensor with a dimension
# that a Reshape declared as its parts (Value.product_shape), whose broadcasting elementwise checks.
ELEMENTWISE = set()


def op(*names, elementwise=False):
    def register(fn):
        for name in names:
            OPS[name] = fn
        if elementwise:
            ELEMENTWISE.update(names)
        return fn
    return register


# --- writing statements ----------------------------------------------------------------------

def indices(rank, prefix="i"):
    return [f"{prefix}{d}" for d in range(rank)]


def read(cx, value, subscripts):
    """`value` read at `subscripts`."""
    name = cx.graph.ref(value)
    return f"{name}[{', '.join(subscripts)}]" if value.rank else name


def target(cx, value, subscripts):
    return f"{value.kname}[{', '.join(subscripts)}]" if value.rank else value.kname


def affine(terms, constant=0):
    """`terms` (coefficient, index) and a constant as a subscript: "2*i2 + r1 - 1"."""
    text = ""
    for coef, name in terms:
        if coef == 0:
            continue
        part = name if abs(coef) == 1 else f"{abs(coef)}*{name}"
        text += (" - " if coef < 0 else " + ") + part if text else ("-" if coef < 0 else "") + part
    if constant or not text:
        text += (f" - {-constant}" if constant < 0 else f" + {constant}") if text else str(constant)
    return text


def literal(x, dtype):
    """A number as the language writes it, exactly in `dtype`."""
    if dtype == "bool":
        return "true" if x else "false"
    if dtype not in FLOAT_TYPES:
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def broadcast_shape(cx, node, shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        dims = [s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0]
        known = set(x for x in dims if x != 1)
        if len(known) > 1:  # two extents, or an extent and a size, or two sizes
            cx.unsupported(node, f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(known.pop() if known else 1)
    return tuple(out)


def broadcast_read(cx, value, out_shape, subscripts):
    """`value` read at the output's point under NumPy broadcasting: its dimensions align to the
    right, and one of extent 1 against a longer one is read at 0."""
    offset = len(out_shape) - value.rank
    subs = [("0" if value.shape[d] == 1 and out_shape[d + offset] != 1 else subscripts[d + offset])
            for d in range(value.rank)]
    return read(cx, value, subs)


def elementwise(cx, node, inputs, dtype, expression):
    """out[I] = expression(reads of `inputs` at I), broadcast. Inputs with a dimension that a
    Reshape declared as its parts (Value.product_shape) must share it, and the others broadcast
    against their trailing dimensions only (a bias): the result is declared as they are."""
    products = [v for v in inputs if v.product_shape is not None]
    if products:
        lead = products[0]
        tail = min(v.declared_tail for v in products)
        for v in inputs:
            if (v.product_shape is not None and (v.product_shape, v.shape) != (lead.product_shape, lead.shape)) or \
                    (v.product_shape is None and v.rank > tail):
                cx.unsupported(node, f"it reads '{lead.name}', of shape {list(lead.product_shape)}, whose dimension "
                                     f"that is a product of sizes '{v.name}' {list(v.onnx_shape)} does not broadcast "
                                     "against as kiln declares it")
        onnx_shape = broadcast_shape(cx, node, [v.onnx_shape for v in inputs])
        shape = lead.shape[:lead.rank - tail] + onnx_shape[len(onnx_shape) - tail:]
        out = cx.output(node, 0, dtype, shape, onnx_shape)
    else:
        shape = broadcast_shape(cx, node, [v.shape for v in inputs])
        out = cx.output(node, 0, dtype, shape)
    subs = indices(len(shape))
    # A known single value beside a computed tensor is written as a literal, which the compiler
    # folds (PyTorch's LayerNorm squares with Pow by a constant 2: x * x, not a call to pow).
    computed = any(v.const is None for v in inputs)
    reads = [literal(v.const.reshape(-1)[0].item(), v.dtype)
             if computed and v.const is not None and v.const.size == 1 and v.const.dtype != object
             else broadcast_read(cx, v, shape, subs) for v in inputs]
    cx.emit(f"{target(cx, out, subs)} = {expression(*reads)}")
    return [out]
