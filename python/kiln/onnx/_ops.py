"""The ONNX operators kiln imports: each writes kiln statements for one node (docs/onnx.md).

A handler gets the converter (`cx`), the node, its input Values (None for an omitted optional
input) and its attributes, and returns its output Values. Shape arithmetic on known values is
folded before a handler is asked (`_fold.py`); a handler that meets what it does not support
raises OnnxImportError through `cx.unsupported`, never writes a wrong statement.
"""

import math

import numpy as np

from ._graph import CHANNELS_FIRST, FLOAT_TYPES, Value

OPS = {}


def op(*names):
    def register(fn):
        for name in names:
            OPS[name] = fn
        return fn
    return register


# --- writing statements ----------------------------------------------------------------------

def indices(rank, prefix="i"):
    return [f"{prefix}{d}" for d in range(rank)]


def read(cx, value, subscripts):
    """`value` read at `subscripts`, written in ONNX's order of its dimensions."""
    name = cx.graph.ref(value)
    return f"{name}[{', '.join(value.in_kiln_order(subscripts))}]" if value.rank else name


def target(cx, value, subscripts):
    return f"{value.kname}[{', '.join(value.in_kiln_order(subscripts))}]" if value.rank else value.kname


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
    """out[I] = expression(reads of `inputs` at I), broadcast."""
    shape = broadcast_shape(cx, node, [v.shape for v in inputs])
    # In the layout of an input of the output's shape: channels first stays channels first.
    like = next((v for v in inputs if v.perm is not None and v.shape == shape), None)
    out = cx.output(node, 0, dtype, shape, like)
    subs = indices(len(shape))
    cx.emit(f"{target(cx, out, subs)} = {expression(*[broadcast_read(cx, v, shape, subs) for v in inputs])}")
    return [out]


# --- elementwise -----------------------------------------------------------------------------

_UNARY = {
    "Relu": "relu({})", "Sigmoid": "sigmoid({})", "Tanh": "tanh({})", "Exp": "exp({})", "Log": "log({})",
    "Sqrt": "sqrt({})", "Abs": "abs({})", "Neg": "-({})", "Erf": "erf({})", "Floor": "floor({})",
    "Ceil": "ceil({})", "Sin": "sin({})", "Cos": "cos({})", "Not": "~({})", "Identity": "{}",
}


@op(*_UNARY)
def unary(cx, node, ins, attrs):
    form = _UNARY[node.op_type]
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: form.format(x))


@op("Reciprocal")
def reciprocal(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"1 / {x}")


@op("Softplus")
def softplus(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"log(1 + exp({x}))")


@op("LeakyRelu")
def leaky_relu(cx, node, ins, attrs):
    alpha = literal(attrs.get("alpha", 0.01), ins[0].dtype)
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"select({x} < 0, {alpha} * {x}, {x})")


@op("Elu")
def elu(cx, node, ins, attrs):
    alpha = literal(attrs.get("alpha", 1.0), ins[0].dtype)
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"select({x} < 0, {alpha} * (exp({x}) - 1), {x})")


@op("HardSigmoid")
def hard_sigmoid(cx, node, ins, attrs):
    t = ins[0].dtype
    alpha, beta = literal(attrs.get("alpha", 0.2), t), literal(attrs.get("beta", 0.5), t)
    return elementwise(cx, node, ins[:1], t, lambda x: f"max(0, min(1, {alpha} * {x} + {beta}))")


@op("Clip")
def clip(cx, node, ins, attrs):
    t = ins[0].dtype
    if cx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo = cx.known(node, ins[1], "min") if len(ins) > 1 and ins[1] is not None else None
        hi = cx.known(node, ins[2], "max") if len(ins) > 2 and ins[2] is not None else None

    def form(x):
        if lo is not None:
            x = f"max({x}, {literal(np.asarray(lo).item(), t)})"
        if hi is not None:
            x = f"min({x}, {literal(np.asarray(hi).item(), t)})"
        return x
    return elementwise(cx, node, ins[:1], t, form)


@op("Dropout")
def dropout(cx, node, ins, attrs):
    if cx.used(node, 1):
        cx.unsupported(node, "its mask output is used (kiln imports models for inference)")
    if len(ins) > 2 and ins[2] is not None and bool(np.asarray(cx.known(node, ins[2], "training_mode")).any()):
        cx.unsupported(node, "training mode (kiln imports models for inference)")
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: x)


_BINARY = {"Add": "{} + {}", "Sub": "{} - {}", "Mul": "{} * {}", "Div": "{} / {}", "Pow": "pow({}, {})",
           "And": "{} & {}", "Or": "{} | {}", "Xor": "{} ^ {}"}
_COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}


@op(*_BINARY)
def binary(cx, node, ins, attrs):
    form = _BINARY[node.op_type]
    if node.op_type == "Pow" and ins[0].dtype != ins[1].dtype:
        cx.unsupported(node, f"a {ins[0].dtype} base with a {ins[1].dtype} exponent")
    return elementwise(cx, node, ins[:2], ins[0].dtype, lambda a, b: form.format(a, f"({b})"))


@op(*_COMPARE)
def compare(cx, node, ins, attrs):
    symbol = _COMPARE[node.op_type]
    return elementwise(cx, node, ins[:2], "bool", lambda a, b: f"{a} {symbol} {b}")


@op("Sum", "Mean", "Max", "Min")
def variadic(cx, node, ins, attrs):
    ins = [v for v in ins if v is not None]
    kind = node.op_type

    def form(*xs):
        if kind in ("Max", "Min"):
            text = xs[0]
            for x in xs[1:]:
                text = f"{kind.lower()}({text}, {x})"
            return text
        text = " + ".join(xs)
        return f"({text}) / {len(xs)}" if kind == "Mean" else text
    return elementwise(cx, node, ins, ins[0].dtype, form)


@op("Where")
def where(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:3], ins[1].dtype, lambda c, a, b: f"select({c}, {a}, {b})")


@op("Cast")
def cast(cx, node, ins, attrs):
    to = cx.kiln_type(node, attrs["to"])
    return elementwise(cx, node, ins[:1], to, lambda x: f"{to}({x})")


# --- products --------------------------------------------------------------------------------

@op("MatMul")
def matmul(cx, node, ins, attrs):
    a, b = ins[:2]
    if a.rank == 0 or b.rank == 0:
        cx.unsupported(node, "a scalar operand")
    a_shape = a.shape if a.rank > 1 else (1,) + a.shape
    b_shape = b.shape if b.rank > 1 else b.shape + (1,)
    batch = broadcast_shape(cx, node, [a_shape[:-2], b_shape[:-2]])
    shape = batch + (a_shape[-2], b_shape[-1])
    if a.rank == 1:
        shape = shape[:-2] + shape[-1:]
    if b.rank == 1:
        shape = shape[:-1]
    out = cx.output(node, 0, a.dtype, shape)
    nb = len(batch)
    bi = indices(nb)
    i, j = f"i{nb}", f"i{nb + 1}"
    a_subs = _batch_subs(a, batch, bi, 2 if a.rank > 1 else 1) + ([i, "r0"] if a.rank > 1 else ["r0"])
    b_subs = _batch_subs(b, batch, bi, 2 if b.rank > 1 else 1) + (["r0", j] if b.rank > 1 else ["r0"])
    out_subs = bi + ([i] if a.rank > 1 else []) + ([j] if b.rank > 1 else [])
    cx.emit(f"{target(cx, out, out_subs)} = sum({read(cx, a, a_subs)} * {read(cx, b, b_subs)})")
    return [out]


def _batch_subs(value, batch, names, matrix_dims):
    """The batch subscripts of one operand of a broadcast product."""
    dims = value.shape[:value.rank - matrix_dims] if value.rank > matrix_dims else ()
    offset = len(batch) - len(dims)
    return [("0" if dims[d] == 1 and batch[d + offset] != 1 else names[d + offset]) for d in range(len(dims))]


def flattened_product_reads(cx, node, a, b, trans_b):
    """a @ b where `a` is a view flattening x's trailing dimensions into its last: x read
    through those dimensions (r0, r1, ...), and b, which must be known, split to match."""
    x, merged = a.view
    if b.const is None:
        cx.unsupported(node, "a product of a flattened tensor with a computed one")
    split = [x.shape[d] for d in merged]
    weights = b.const.T if trans_b else b.const
    weights = np.ascontiguousarray(weights).reshape(*split, weights.shape[-1])
    reduced = [f"r{k}" for k in range(len(merged))]
    if x.perm is not None:
        # Channels first puts the batch between the channels and the rows: a copy in ONNX's
        # order makes the product's columns one run of dimensions, so that it is a gemm call.
        copy = cx.graph.temporary(x.dtype, x.shape, "flat")
        subs = indices(x.rank)
        cx.emit(f"{target(cx, copy, subs)} = {read(cx, x, subs)}")
        x = copy
    # The rows: x's first dimension; the dimensions between it and the merged ones have extent 1.
    x_subs = ["i0" if d == 0 else "0" for d in range(x.rank)]
    for d, r in zip(merged, reduced):
        x_subs[d] = r
    w = cx.constant(weights, "flat_weights")
    return read(cx, x, x_subs), read(cx, w, [*reduced, "i1"])


@op("Gemm")
def gemm(cx, node, ins, attrs):
    a, b = ins[:2]
    c = ins[2] if len(ins) > 2 else None
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    trans_a, trans_b = attrs.get("transA", 0), attrs.get("transB", 0)
    if a.dtype not in FLOAT_TYPES and (alpha != int(alpha) or beta != int(beta)):
        cx.unsupported(node, f"alpha {alpha} and beta {beta} that are not whole, on {a.dtype} operands")
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    out = cx.output(node, 0, a.dtype, (m, n))
    if a.view is not None and not trans_a:
        a_read, b_read = flattened_product_reads(cx, node, a, b, trans_b)
    else:
        a_read = read(cx, a, ["r0", "i0"] if trans_a else ["i0", "r0"])
        b_read = read(cx, b, ["i1", "r0"] if trans_b else ["r0", "i1"])
    text = f"sum({a_read} * {b_read})"
    if alpha != 1:
        text = f"{literal(alpha, a.dtype)} * {text}"
    if c is not None and beta != 0:
        bias = broadcast_read(cx, c, (m, n), ["i0", "i1"])
        text += f" + {bias}" if beta == 1 else f" + {literal(beta, a.dtype)} * {bias}"
    cx.emit(f"{target(cx, out, ['i0', 'i1'])} = {text}")
    return [out]


# --- convolutions and pooling ----------------------------------------------------------------

def _window(cx, node, x, kernel, attrs):
    """Strides, dilations, begin pads and the output's spatial extents of a convolution or pool
    over `x`'s dimensions 2... with `kernel`'s extents."""
    spatial = x.rank - 2
    if any(not isinstance(d, int) for d in x.shape[2:]):
        cx.unsupported(node, "spatial dimensions that are sizes")
    strides = list(attrs.get("strides", [1] * spatial))
    dilations = list(attrs.get("dilations", [1] * spatial))
    pads = list(attrs.get("pads", [0] * (2 * spatial)))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    ceil_mode = attrs.get("ceil_mode", 0)
    out = []
    for d in range(spatial):
        size, k, s, dl = x.shape[2 + d], kernel[d], strides[d], dilations[d]
        reach = dl * (k - 1) + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + reach - size)
            pads[d] = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads[d + spatial] = total - pads[d]
        elif auto_pad == "VALID":
            pads[d] = pads[d + spatial] = 0
        span = size + pads[d] + pads[d + spatial] - reach
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + pads[d]:
            o -= 1  # a last window that would start in the end padding is dropped (ONNX's rule)
        if o < 1:
            cx.unsupported(node, f"an empty output along spatial dimension {d}")
        out.append(o)
    return strides, dilations, pads[:spatial], out


@op("Conv")
def conv(cx, node, ins, attrs):
    x, w = ins[:2]
    b = ins[2] if len(ins) > 2 else None
    if x.rank < 3:
        cx.unsupported(node, f"an input of rank {x.rank}")
    group = attrs.get("group", 1)
    kernel = list(w.shape[2:])
    strides, dilations, pads, spatial = _window(cx, node, x, kernel, attrs)
    out = cx.output(node, 0, x.dtype, (x.shape[0], w.shape[0], *spatial), CHANNELS_FIRST if x.rank == 4 else None)
    if group == 1 and x.rank == 4 and w.const is not None:
        conv_products(cx, x, w.const, b, strides, dilations, pads, out)
        return [out]
    n = x.rank - 2
    o_subs = indices(2 + n)
    reads = [affine([(strides[d], f"i{2 + d}"), (dilations[d], f"r{1 + d}")], -pads[d]) for d in range(n)]
    w_window = [f"r{1 + d}" for d in range(n)]
    if group == 1:
        x_read = read(cx, x, ["i0", "r0", *reads])
        w_read = read(cx, w, ["i1", "r0", *w_window])
    elif group == x.shape[1] and w.shape[0] == group and w.shape[1] == 1:
        x_read = read(cx, x, ["i0", "i1", *reads])  # depthwise: output channel o reads channel o
        w_read = read(cx, w, ["i1", "0", *w_window])
    else:
        return grouped_conv(cx, node, x, w, b, group, out, (strides, dilations, pads), w_window)
    text = f"sum({x_read} * {w_read})"
    if b is not None:
        text += f" + {read(cx, b, ['i1'])}"
    cx.emit(f"{target(cx, out, o_subs)} = {text}")
    return [out]


def conv_products(cx, x, weights, bias, strides, dilations, pads, out, first_channel=0):
    """out = the 2-D convolution of x's channels from `first_channel` on (as many as the known
    `weights` take) as one product per kernel tap (kn2row): for each (kh, kw) the input points
    that tap reads are copied into a [C, N, OH, OW] scratch tensor (zero where the window leaves
    the input, the stride applied), and out += weights[:, :, kh, kw] @ scratch, which the
    compiler turns into a gemm call over the columns (n, h, w). A 1x1 convolution with stride 1
    and no padding over all of a channels-first input multiplies the input itself."""
    channels, spatial = weights.shape[1], out.shape[2:]
    whole = channels == x.shape[1]
    subs = indices(4)
    op = "="
    if bias is not None:
        cx.emit(f"{target(cx, out, subs)} = {read(cx, bias, ['i1'])}")
        op = "+="
    for kh in range(weights.shape[2]):
        for kw in range(weights.shape[3]):
            tap = cx.constant(np.ascontiguousarray(weights[:, :, kh, kw]), "conv_tap")
            if weights.shape[2:] == (1, 1) and strides == [1, 1] and pads == [0, 0] and whole \
                    and x.perm == CHANNELS_FIRST:
                src = x
            else:
                src = cx.scratch(x.dtype, (x.shape[0], channels, *spatial), CHANNELS_FIRST)
                rows = affine([(strides[0], "i2")], dilations[0] * kh - pads[0])
                cols = affine([(strides[1], "i3")], dilations[1] * kw - pads[1])
                if whole:
                    cx.emit(f"{target(cx, src, subs)} = {read(cx, x, ['i0', 'i1', rows, cols])}")
                else:  # a group's channels, read at their offset through a sum over one point
                    channel = affine([(1, "i1"), (-1, "q0")], first_channel)
                    cx.emit(f"{target(cx, src, subs)} = sum({read(cx, x, ['i0', channel, rows, cols])}) "
                            "where q0 < 1")
            cx.emit(f"{target(cx, out, subs)} {op} sum({read(cx, tap, ['i1', 'r0'])} * "
                    f"{read(cx, src, ['i0', 'r0', 'i2', 'i3'])})")
            op = "+="


def grouped_conv(cx, node, x, w, b, group, out, reads, w_window):
    """A convolution in `group` groups: each group's output channels into a tensor of their
    own, from the group's slice of the (known) weights and its input channels, then those
    placed side by side as Concat places its parts. In 2-D each group is products
    (conv_products); otherwise a loop nest whose input channels are read at the group's offset
    through a sum over one point (q0 < 1), as Concat reads its parts."""
    per_in, per_out = x.shape[1] // group, w.shape[0] // group
    if x.shape[1] % group or w.shape[0] % group or w.shape[1] != per_in:
        cx.unsupported(node, f"group={group} with {x.shape[1]} input and {w.shape[0]} output channels")
    if w.const is None or (b is not None and b.const is None):
        cx.unsupported(node, f"group={group} with weights the model computes")
    strides, dilations, pads = reads
    subs = indices(out.rank)
    parts = []
    for g in range(group):
        part = cx.graph.temporary(x.dtype, (out.shape[0], per_out, *out.shape[2:]), "group")
        part.perm = out.perm
        w_g = np.ascontiguousarray(w.const[g * per_out:(g + 1) * per_out])
        b_g = None if b is None else cx.constant(np.ascontiguousarray(b.const[g * per_out:(g + 1) * per_out]),
                                                 "group_bias")
        if x.rank == 4:
            conv_products(cx, x, w_g, b_g, strides, dilations, pads, part, g * per_in)
        else:
            window = [affine([(strides[d], f"i{2 + d}"), (dilations[d], f"r{1 + d}")], -pads[d])
                      for d in range(x.rank - 2)]
            x_read = read(cx, x, ["i0", affine([(1, "r0"), (-1, "q0")], g * per_in), *window])
            text = f"sum({x_read} * {read(cx, cx.constant(w_g, 'group_weights'), ['i1', 'r0', *w_window])})"
            if b_g is not None:
                text += f" + {read(cx, b_g, ['i1'])}"
            cx.emit(f"{target(cx, part, subs)} = {text} where q0 < 1")
        parts.append(part)
    place_side_by_side(cx, out, parts, 1)
    return [out]


@op("MaxPool", "AveragePool")
def pool(cx, node, ins, attrs):
    x = ins[0]
    if cx.used(node, 1):
        cx.unsupported(node, "its Indices output")
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads, spatial = _window(cx, node, x, kernel, attrs)
    out = cx.output(node, 0, x.dtype, (*x.shape[:2], *spatial), x)
    n = x.rank - 2
    o_subs = indices(2 + n)
    reads = [affine([(strides[d], f"i{2 + d}"), (dilations[d], f"r{d}")], -pads[d]) for d in range(n)]
    x_read = read(cx, x, ["i0", "i1", *reads])
    bounds = " where " + ", ".join(f"r{d} < {kernel[d]}" for d in range(n))
    if node.op_type == "MaxPool":
        cx.emit(f"{target(cx, out, o_subs)} = max({x_read}){bounds}")
        return [out]
    # The points each window covers: the whole kernel where padded points count
    # (count_include_pad=1, within the padded input), else only the input's own.
    include_pad = attrs.get("count_include_pad", 0)
    counts = np.ones(spatial, dtype=np.float64)
    for d in range(n):
        size = x.shape[2 + d]
        lo, hi = (-pads[d], size + pads[d]) if include_pad else (0, size)
        if include_pad:
            end_pad = max(0, (spatial[d] - 1) * strides[d] + dilations[d] * (kernel[d] - 1) + 1 - size - pads[d])
            hi = size + end_pad
        per = np.array([sum(1 for k in range(kernel[d]) if lo <= o * strides[d] + k * dilations[d] - pads[d] < hi)
                        for o in range(spatial[d])], dtype=np.float64)
        counts = counts * per.reshape([-1 if e == d else 1 for e in range(n)])
    if np.all(counts == counts.flat[0]):
        text = f"sum({x_read}) / {literal(counts.flat[0], x.dtype)}"
    else:
        count = cx.constant(counts.astype(np.float32 if x.dtype != "f64" else np.float64), "pool_count")
        text = f"sum({x_read}) / {read(cx, count, o_subs[2:])}"
    cx.emit(f"{target(cx, out, o_subs)} = {text}{bounds}")
    return [out]


@op("GlobalAveragePool", "GlobalMaxPool")
def global_pool(cx, node, ins, attrs):
    x = ins[0]
    n = x.rank - 2
    out = cx.output(node, 0, x.dtype, (*x.shape[:2], *([1] * n)))
    fn = "mean" if node.op_type == "GlobalAveragePool" else "max"
    x_read = read(cx, x, ["i0", "i1", *[f"r{d}" for d in range(n)]])
    cx.emit(f"{target(cx, out, indices(2 + n))} = {fn}({x_read})")
    return [out]


@op("BatchNormalization")
def batch_norm(cx, node, ins, attrs):
    x = ins[0]
    if any(cx.used(node, i) for i in range(1, len(node.output))):
        cx.unsupported(node, "training outputs (kiln imports models for inference)")
    scale, bias, mean, var = (cx.known(node, v, name) for v, name in
                              zip(ins[1:5], ("scale", "B", "input_mean", "input_var")))
    eps = attrs.get("epsilon", 1e-5)
    # y = (x - mean) / sqrt(var + eps) * scale + B, folded into one multiply and add per channel.
    a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    dt = np.float64 if x.dtype == "f64" else np.float32
    av, bv = cx.constant(a.astype(dt), "bn_scale"), cx.constant(b.astype(dt), "bn_shift")
    out = cx.output(node, 0, x.dtype, x.shape, x)
    subs = indices(x.rank)
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, subs)} * {read(cx, av, ['i1'])} + {read(cx, bv, ['i1'])}")
    return [out]


@op("LRN")
def lrn(cx, node, ins, attrs):
    x = ins[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    out = cx.output(node, 0, x.dtype, x.shape, x)
    subs = indices(x.rank)
    half = (size - 1) // 2
    window = [subs[0], affine([(1, "i1"), (1, "r0")], -half), *subs[2:]]
    sq = read(cx, x, window)
    t = x.dtype
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, subs)} / pow({literal(bias, t)} + "
            f"{literal(alpha / size, t)} * sum({sq} * {sq}), {literal(beta, t)}) where r0 < {size}")
    return [out]


# --- softmax and reductions ------------------------------------------------------------------

@op("Softmax", "LogSoftmax")
def softmax(cx, node, ins, attrs):
    x = ins[0]
    axis = attrs.get("axis", -1 if cx.opset >= 13 else 1)
    axis += x.rank if axis < 0 else 0
    # Before opset 13 the input is flattened at `axis` into rows: every dimension from it on.
    reduced = [axis] if cx.opset >= 13 else list(range(axis, x.rank))
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)

    def at(prefix):
        return read(cx, x, [f"{prefix}{d}" if d in reduced else subs[d] for d in range(x.rank)])
    mx = f"max({at('m')})"
    total = f"sum(exp({at('k')} - {mx}))"
    here = read(cx, x, subs)
    text = (f"exp({here} - {mx}) / {total}" if node.op_type == "Softmax"
            else f"{here} - {mx} - log({total})")
    cx.emit(f"{target(cx, out, subs)} = {text}")
    return [out]


@op("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd")
def reduce(cx, node, ins, attrs):
    x = ins[0]
    axes_from_input = node.op_type == "ReduceSum" and cx.opset >= 13 or cx.opset >= 18
    if axes_from_input:
        axes = cx.known(node, ins[1], "axes") if len(ins) > 1 and ins[1] is not None else None
        axes = None if axes is None or axes.size == 0 else [int(a) for a in axes]
        if axes is None and attrs.get("noop_with_empty_axes", 0):
            return elementwise(cx, node, ins[:1], x.dtype, lambda v: v)
    else:
        axes = attrs.get("axes")
    axes = list(range(x.rank)) if axes is None else sorted(a + x.rank if a < 0 else a for a in axes)
    keep = attrs.get("keepdims", 1)
    shape = tuple(1 if d in axes else x.shape[d] for d in range(x.rank)) if keep else \
        tuple(x.shape[d] for d in range(x.rank) if d not in axes)
    out = cx.output(node, 0, x.dtype, shape)
    kept = [d for d in range(x.rank) if d not in axes]
    x_subs = [f"r{d}" if d in axes else f"i{d}" for d in range(x.rank)]
    out_subs = [f"i{d}" for d in range(x.rank)] if keep else [f"i{d}" for d in kept]
    fn = node.op_type[len("Reduce"):].lower()
    cx.emit(f"{target(cx, out, out_subs)} = {fn}({read(cx, x, x_subs)})")
    return [out]


# --- moving data -----------------------------------------------------------------------------

@op("Transpose")
def transpose(cx, node, ins, attrs):
    x = ins[0]
    perm = list(attrs.get("perm", reversed(range(x.rank))))
    out = cx.output(node, 0, x.dtype, tuple(x.shape[p] for p in perm))
    subs = indices(x.rank)
    x_subs = [None] * x.rank
    for j, p in enumerate(perm):
        x_subs[p] = subs[j]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")
    return [out]


def _groups(a, b):
    """Pairs (dims of a, dims of b) whose extents multiply to the same, in order, over shapes
    without dimensions of extent 1; a size matches only itself. None where there are none."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if isinstance(a[i], str) or isinstance(b[j], str):
            if a[i] != b[j]:
                return None
            out.append(([i], [j]))
            i, j = i + 1, j + 1
            continue
        gi, gj, pa, pb = [i], [j], a[i], b[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                if i >= len(a) or isinstance(a[i], str):
                    return None
                pa, i = pa * a[i], i + 1
                gi.append(i - 1)
            else:
                if j >= len(b) or isinstance(b[j], str):
                    return None
                pb, j = pb * b[j], j + 1
                gj.append(j - 1)
        out.append((gi, gj))
    return out if i == len(a) and j == len(b) else None


def reshape_to(cx, node, x, shape):
    """out = x in `shape`, the same elements in row-major order. Where each dimension of x
    becomes one or several of the output's (a split, extents of 1 inserted or removed), a copy
    that reads x at affine subscripts. Where several of x's trailing dimensions become the
    output's last (a flatten) and only Gemms read it, a view that each Gemm reads through x's
    own dimensions (`Value.view`). Otherwise each dimension of x that several of the output's
    make is read through a gather: a known table of its index at each of their points."""
    kept_in = [d for d in range(x.rank) if x.shape[d] != 1]
    kept_out = [d for d in range(len(shape)) if shape[d] != 1]
    groups = _groups([x.shape[d] for d in kept_in], [shape[d] for d in kept_out])
    if groups is None:
        cx.unsupported(node, f"a reshape of a computed tensor from {list(x.shape)} to {list(shape)} that does not "
                             "keep its sizes in place")
    flatten = all(len(gj) == 1 for _, gj in groups) and all(len(gi) == 1 for gi, _ in groups[:-1])
    if groups and flatten and len(groups[-1][0]) > 1 and cx.read_only_as(node.output[0], "Gemm", 0):
        out = Value(node.output[0], x.dtype, shape)
        out.view = (x, [kept_in[d] for d in groups[-1][0]])
        cx.values[node.output[0]] = out
        return [out]
    out = cx.output(node, 0, x.dtype, shape)
    subs = indices(len(shape))
    x_subs = ["0"] * x.rank
    for gi, gj in groups:
        out_dims = [kept_out[k] for k in gj]
        if len(gi) == 1:
            terms, stride = [], 1
            for d in reversed(out_dims):
                terms.append((stride, subs[d]))
                stride *= shape[d]
            x_subs[kept_in[gi[0]]] = affine(list(reversed(terms)))
            continue
        extents = [shape[d] for d in out_dims]
        flat = np.arange(int(np.prod(extents)), dtype=np.int64).reshape(extents)
        stride = int(np.prod([x.shape[kept_in[k]] for k in gi]))
        for k in gi:
            extent = x.shape[kept_in[k]]
            stride //= extent
            table = cx.constant(((flat // stride) % extent).astype(np.int32), "reshape_index")
            x_subs[kept_in[k]] = read(cx, table, [subs[d] for d in out_dims])
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")
    return [out]


def reshaped(cx, node, x, target_shape, allowzero=0):
    """ONNX Reshape's output shape: 0 copies the input's dimension (unless allowzero), -1 is
    what the other dimensions leave."""
    shape = []
    for d, t in enumerate(target_shape):
        shape.append(x.shape[d] if t == 0 and not allowzero else t)
    if -1 in shape:
        known = [s for s in shape if s != -1]
        total = _element_count(cx, node, x.shape)
        rest = _element_count(cx, node, known)
        if isinstance(total, int) and isinstance(rest, int):
            shape[shape.index(-1)] = total // rest
        elif not isinstance(total, int) and not isinstance(rest, int) and total[1] == rest[1]:
            shape[shape.index(-1)] = total[0] // rest[0]  # the same sizes on both sides
        else:
            cx.unsupported(node, f"a -1 in {list(target_shape)} against a shape with sizes {list(x.shape)}")
    return tuple(shape)


def _element_count(cx, node, shape):
    count, symbols = 1, []
    for d in shape:
        if isinstance(d, int):
            count *= d
        else:
            symbols.append(d)
    return count if not symbols else (count, tuple(sorted(symbols)))


@op("Reshape")
def reshape(cx, node, ins, attrs):
    target_shape = [x if isinstance(x, str) else int(x) for x in cx.known(node, ins[1], "shape", symbolic=True)]
    return reshape_to(cx, node, ins[0], reshaped(cx, node, ins[0], target_shape, attrs.get("allowzero", 0)))


@op("Flatten")
def flatten(cx, node, ins, attrs):
    x = ins[0]
    axis = attrs.get("axis", 1)
    axis += x.rank if axis < 0 else 0
    lead, rest = _element_count(cx, node, x.shape[:axis]), _element_count(cx, node, x.shape[axis:])
    if not isinstance(lead, int) and lead[0] == 1 and len(lead[1]) == 1:
        lead = lead[1][0]  # one size and extents of 1: that size
    if not isinstance(lead, (int, str)) or not isinstance(rest, int):
        cx.unsupported(node, f"flattening a shape with sizes {list(x.shape)}")
    return reshape_to(cx, node, x, (lead, rest))


@op("Squeeze")
def squeeze(cx, node, ins, attrs):
    x = ins[0]
    axes = attrs.get("axes") if cx.opset < 13 else (cx.known(node, ins[1], "axes") if len(ins) > 1 else None)
    axes = [d for d in range(x.rank) if x.shape[d] == 1] if axes is None else \
        [int(a) + (x.rank if a < 0 else 0) for a in axes]
    return reshape_to(cx, node, x, tuple(x.shape[d] for d in range(x.rank) if d not in axes))


@op("Unsqueeze")
def unsqueeze(cx, node, ins, attrs):
    x = ins[0]
    axes = attrs.get("axes") if cx.opset < 13 else cx.known(node, ins[1], "axes")
    rank = x.rank + len(axes)
    axes = sorted(int(a) + (rank if a < 0 else 0) for a in axes)
    shape, it = [], iter(x.shape)
    for d in range(rank):
        shape.append(1 if d in axes else next(it))
    return reshape_to(cx, node, x, tuple(shape))


@op("Concat")
def concat(cx, node, ins, attrs):
    ins = [v for v in ins if v is not None and (v.rank == 0 or v.shape[attrs["axis"]] != 0)]
    axis = attrs["axis"] + (ins[0].rank if attrs["axis"] < 0 else 0)
    if any(not isinstance(v.shape[axis], int) for v in ins):
        cx.unsupported(node, "concatenating along a dimension that is a size")
    shape = list(ins[0].shape)
    shape[axis] = sum(v.shape[axis] for v in ins)
    out = cx.output(node, 0, ins[0].dtype, tuple(shape), ins[0])
    place_side_by_side(cx, out, ins, axis)
    return [out]


def place_side_by_side(cx, out, parts, axis):
    """out = the parts one after another along `axis`. Each part reads the output's point
    shifted by its offset. The language has no slice of a target, so each read is a sum over one
    point (q0 < 1): a point outside the part's extent then contributes nothing, which places
    every part where it belongs and 0 elsewhere."""
    subs = indices(out.rank)
    texts, offset = [], 0
    for v in parts:
        v_subs = list(subs)
        v_subs[axis] = affine([(1, subs[axis]), (-1, "q0")], -offset)
        texts.append(f"sum({read(cx, v, v_subs)})")
        offset += v.shape[axis]
    cx.emit(f"{target(cx, out, subs)} = {' + '.join(texts)} where q0 < 1")


@op("Slice")
def slice_(cx, node, ins, attrs):
    x = ins[0]
    if cx.opset < 10:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends = cx.known(node, ins[1], "starts"), cx.known(node, ins[2], "ends")
        axes = cx.known(node, ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = cx.known(node, ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [int(a) + (x.rank if a < 0 else 0) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    begin, step, shape = [0] * x.rank, [1] * x.rank, list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        if not isinstance(x.shape[a], int):
            cx.unsupported(node, "slicing a dimension that is a size")
        first, last, count = _slice_range(x.shape[a], int(s), int(e), st)
        begin[a], step[a], shape[a] = first, st, count
    out = cx.output(node, 0, x.dtype, tuple(shape))
    subs = indices(x.rank)
    # A dimension read from 0 in steps of 1 but not to its end would stand alone in two extents,
    # which the language refuses: it is read through a sum over one point, as Concat's parts.
    short = [d for d in range(x.rank) if begin[d] == 0 and step[d] == 1 and shape[d] != x.shape[d]]
    x_subs = [affine([(step[d], subs[d])] + ([(-1, "q0")] if d in short else []), begin[d]) for d in range(x.rank)]
    text = f"sum({read(cx, x, x_subs)}) where q0 < 1" if short else read(cx, x, x_subs)
    cx.emit(f"{target(cx, out, subs)} = {text}")
    return [out]


def _slice_range(size, start, end, step):
    first, stop, stride = slice(start, end, step).indices(size)
    count = max(0, -(-(stop - first) // stride))
    return first, stop, count


@op("Pad")
def pad(cx, node, ins, attrs):
    x = ins[0]
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    pads = attrs.get("pads") if cx.opset < 11 else cx.known(node, ins[1], "pads")
    value = attrs.get("value", 0.0) if cx.opset < 11 else (
        cx.known(node, ins[2], "constant_value").item() if len(ins) > 2 and ins[2] is not None else 0)
    if mode != "constant" or value != 0 or (len(ins) > 3 and ins[3] is not None):
        cx.unsupported(node, "padding other than with zeros on every axis")
    pads = [int(p) for p in pads]
    if any(p < 0 for p in pads):
        cx.unsupported(node, "negative pads")
    shape = tuple(x.shape[d] + pads[d] + pads[d + x.rank] for d in range(x.rank))
    out = cx.output(node, 0, x.dtype, shape)
    subs = indices(x.rank)
    # A compound subscript outside its dimension reads 0: the padding itself.
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, [affine([(1, subs[d])], -pads[d]) for d in range(x.rank)])}")
    return [out]


@op("Gather")
def gather(cx, node, ins, attrs):
    data, idx = ins[:2]
    axis = attrs.get("axis", 0) + (data.rank if attrs.get("axis", 0) < 0 else 0)
    if idx.dtype not in ("i32", "i64"):
        cx.unsupported(node, f"{idx.dtype} indices")
    shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
    out = cx.output(node, 0, data.dtype, shape)
    subs = indices(len(shape))
    i_subs = subs[axis:axis + idx.rank]
    at = read(cx, idx, i_subs)
    extent = data.shape[axis]
    # ONNX counts negative positions from the end.
    position = f"{at} + {extent} * {idx.dtype}({at} < 0)" if isinstance(extent, int) else at
    d_subs = subs[:axis] + [position] + subs[axis + idx.rank:]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, data, d_subs)}")
    return [out]


@op("Expand")
def expand(cx, node, ins, attrs):
    x = ins[0]
    wanted = tuple(int(d) for d in cx.known(node, ins[1], "shape"))
    shape = broadcast_shape(cx, node, [x.shape, wanted])
    out = cx.output(node, 0, x.dtype, shape)
    subs = indices(len(shape))
    cx.emit(f"{target(cx, out, subs)} = {broadcast_read(cx, x, shape, subs)}")
    return [out]
