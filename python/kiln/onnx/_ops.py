"""The ONNX operators kiln imports: elementwise, softmax, reductions and normalizations here,
products in `_products.py`, convolutions and pooling in `_conv.py`, data movement in
`_movement.py` (docs/onnx.md).

A handler gets the converter (`cx`), the node, its input Values (None for an omitted optional
input) and its attributes, and returns its output Values. Values known at import are folded
before a handler is asked (`_importer.py`); a handler that meets what it does not support
raises OnnxImportError through `cx.unsupported`, never writes a wrong statement.
"""

import numpy as np

from ._emit import OPS, broadcast_read, elementwise, indices, literal, op, read, target
from ._graph import FLOAT_TYPES
from ._movement import slice_into

# --- elementwise -----------------------------------------------------------------------------

_UNARY = {
    "Relu": "relu({})", "Sigmoid": "sigmoid({})", "Tanh": "tanh({})", "Exp": "exp({})", "Log": "log({})",
    "Sqrt": "sqrt({})", "Abs": "abs({})", "Neg": "-({})", "Erf": "erf({})", "Floor": "floor({})",
    "Ceil": "ceil({})", "Sin": "sin({})", "Cos": "cos({})", "Tan": "sin({0}) / cos({0})", "Not": "~({})",
    "Identity": "{}", "Softsign": "{0} / (1 + abs({0}))", "Sign": "select({0} > 0, 1, select({0} < 0, -1, {0}))",
    "HardSwish": "{0} * max(0, min(1, {0} / 6 + 0.5))",
}


@op(*_UNARY, elementwise=True)
def unary(cx, node, ins, attrs):
    form = _UNARY[node.op_type]
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: form.format(x))


@op("Reciprocal", elementwise=True)
def reciprocal(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"1 / {x}")


@op("Softplus", elementwise=True)
def softplus(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: f"log(1 + exp({x}))")


# Activations of one attribute `alpha`: its default and the form of the result ({x}, {alpha}).
_ALPHA_FORMS = {"LeakyRelu": (0.01, "select({x} < 0, {alpha} * {x}, {x})"),
                "Elu": (1.0, "select({x} < 0, {alpha} * (exp({x}) - 1), {x})"),
                "ThresholdedRelu": (1.0, "select({x} > {alpha}, {x}, 0)"),
                "Celu": (1.0, "max(0, {x}) + min(0, {alpha} * (exp({x} / {alpha}) - 1))")}


@op(*_ALPHA_FORMS, elementwise=True)
def alpha_activation(cx, node, ins, attrs):
    default, form = _ALPHA_FORMS[node.op_type]
    alpha = literal(attrs.get("alpha", default), ins[0].dtype)
    return elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: form.format(x=x, alpha=alpha))


@op("Selu", elementwise=True)
def selu(cx, node, ins, attrs):
    t = ins[0].dtype
    alpha = literal(attrs.get("alpha", 1.67326319217681884765625), t)
    gamma = literal(attrs.get("gamma", 1.05070102214813232421875), t)
    return elementwise(cx, node, ins[:1], t, lambda x: f"{gamma} * select({x} > 0, {x}, {alpha} * exp({x}) - {alpha})")


@op("IsNaN", "IsInf", elementwise=True)
def is_special(cx, node, ins, attrs):
    if node.op_type == "IsNaN":
        return elementwise(cx, node, ins[:1], "bool", lambda x: f"{x} != {x}")
    tests = (["{0} == inf"] if attrs.get("detect_positive", 1) else []) + \
        (["{0} == -inf"] if attrs.get("detect_negative", 1) else [])
    return elementwise(cx, node, ins[:1], "bool",
                       lambda x: " | ".join(f"({t.format(x)})" for t in tests) if tests else "false")


@op("Shrink", elementwise=True)
def shrink(cx, node, ins, attrs):
    t = ins[0].dtype
    lambd, bias = literal(attrs.get("lambd", 0.5), t), literal(attrs.get("bias", 0.0), t)
    return elementwise(cx, node, ins[:1], t,
                       lambda x: f"select({x} < -{lambd}, {x} + {bias}, select({x} > {lambd}, {x} - {bias}, 0))")


@op("PRelu", elementwise=True)
def prelu(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:2], ins[0].dtype, lambda x, slope: f"select({x} < 0, {slope} * {x}, {x})")


@op("HardSigmoid", elementwise=True)
def hard_sigmoid(cx, node, ins, attrs):
    t = ins[0].dtype
    alpha, beta = literal(attrs.get("alpha", 0.2), t), literal(attrs.get("beta", 0.5), t)
    return elementwise(cx, node, ins[:1], t, lambda x: f"max(0, min(1, {alpha} * {x} + {beta}))")


@op("Clip", elementwise=True)
def clip(cx, node, ins, attrs):
    t = ins[0].dtype
    def bound(i, name):  # a literal where known, else the one value read where it runs
        if cx.opset < 11:
            return literal(attrs[name], t) if name in attrs else None
        if len(ins) <= i or ins[i] is None:
            return None
        if ins[i].const is not None:
            return literal(np.asarray(cx.known(node, ins[i], name)).item(), t)
        return read(cx, ins[i], ["0"] * ins[i].rank)
    lo, hi = bound(1, "min"), bound(2, "max")

    def form(x):
        if lo is not None:
            x = f"max({x}, {lo})"
        if hi is not None:
            x = f"min({x}, {hi})"
        return x
    return elementwise(cx, node, ins[:1], t, form)


@op("Dropout", elementwise=True)
def dropout(cx, node, ins, attrs):
    """Inference: the input, and a mask (where read) that keeps every element."""
    if len(ins) > 2 and ins[2] is not None and bool(np.asarray(cx.known(node, ins[2], "training_mode")).any()):
        cx.unsupported(node, "training mode (kiln imports models for inference)")
    out = elementwise(cx, node, ins[:1], ins[0].dtype, lambda x: x)
    if not cx.used(node, 1):
        return out
    if ins[0].product_shape is not None:
        cx.unsupported(node, "its mask output, of a tensor with a dimension that is a product of sizes")
    mask = cx.output(node, 1, "bool", ins[0].shape)
    subs = indices(ins[0].rank)
    cx.emit(f"{target(cx, mask, subs)} = true")
    return out + [mask]


@op("BitShift", elementwise=True)
def bit_shift(cx, node, ins, attrs):
    direction = attrs.get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        cx.unsupported(node, f"direction {direction!r} (LEFT or RIGHT)")
    shift = "<<" if direction == "LEFT" else ">>"
    return elementwise(cx, node, ins[:2], ins[0].dtype, lambda x, n: f"{x} {shift} ({n})")


@op("Hardmax")
def hardmax(cx, node, ins, attrs):
    """1 at the first largest element along `axis` (opset 13's one axis), 0 elsewhere."""
    x = ins[0]
    axis = attrs.get("axis", -1 if cx.opset >= 13 else 1)
    axis += x.rank if axis < 0 else 0
    if cx.opset < 13 and axis != x.rank - 1:
        cx.unsupported(node, f"axis {axis} before opset 13 (every dimension from it on as one)")
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)
    first = f"argmax({read(cx, x, [f'r{d}' if d == axis else subs[d] for d in range(x.rank)])})"
    cx.emit(f"{target(cx, out, subs)} = select({subs[axis]} == {first}, 1, 0)")
    return [out]


_BINARY = {"Add": "{} + {}", "Sub": "{} - {}", "Mul": "{} * {}", "Div": "{} / {}", "Pow": "pow({}, {})",
           "And": "{} & {}", "Or": "{} | {}", "Xor": "{} ^ {}"}
_COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}


@op(*_BINARY, elementwise=True)
def binary(cx, node, ins, attrs):
    form = _BINARY[node.op_type]
    if node.op_type == "Pow" and ins[0].dtype != ins[1].dtype:
        # ONNX's result has the base's type, whatever the exponent's: computed in f64 and cast.
        base = ins[0].dtype
        return elementwise(cx, node, ins[:2], base, lambda a, b: f"{base}(pow(f64({a}), f64({b})))")
    return elementwise(cx, node, ins[:2], ins[0].dtype, lambda a, b: form.format(a, f"({b})"))


@op(*_COMPARE, elementwise=True)
def compare(cx, node, ins, attrs):
    symbol = _COMPARE[node.op_type]
    return elementwise(cx, node, ins[:2], "bool", lambda a, b: f"{a} {symbol} {b}")


@op("Sum", "Mean", "Max", "Min", elementwise=True)
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


@op("Where", elementwise=True)
def where(cx, node, ins, attrs):
    return elementwise(cx, node, ins[:3], ins[1].dtype, lambda c, a, b: f"select({c}, {a}, {b})")


@op("Cast", elementwise=True)
def cast(cx, node, ins, attrs):
    to = cx.kiln_type(node, attrs["to"])
    return elementwise(cx, node, ins[:1], to, lambda x: f"{to}({x})")


@op("CastLike", elementwise=True)
def cast_like(cx, node, ins, attrs):
    to = ins[1].dtype
    return elementwise(cx, node, ins[:1], to, lambda x: f"{to}({x})")


@op("Trilu")
def trilu(cx, node, ins, attrs):
    """The upper (upper=1) or lower triangle of the last two dimensions from diagonal k, the rest 0."""
    x = ins[0]
    if x.rank < 2:
        cx.unsupported(node, f"a {x.rank}-dimensional input (Trilu takes matrices)")
    if len(ins) < 2 or ins[1] is None:
        k = "0"
    elif ins[1].const is not None:
        k = str(int(np.asarray(cx.known(node, ins[1], "k")).reshape(-1)[0]))
    else:  # read where it runs
        k = read(cx, ins[1], ["0"] * ins[1].rank)
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)
    row, col = subs[-2], subs[-1]
    keep = f"{col} - {row} >= {k}" if attrs.get("upper", 1) else f"{col} - {row} <= {k}"
    cx.emit(f"{target(cx, out, subs)} = select({keep}, {read(cx, x, subs)}, 0)")
    return [out]


@op("Mod", elementwise=True)
def mod(cx, node, ins, attrs):
    """Integers: the remainder of the division toward zero (fmod=1, C's %), or with the divisor's
    sign (fmod=0, Python's %). Floats only with fmod=1, as ONNX requires."""
    a, b = ins[:2]
    if attrs.get("fmod", 0) == 0 and a.dtype in FLOAT_TYPES:
        cx.unsupported(node, "fmod=0 on floats (ONNX requires fmod=1 there)")
    if a.dtype in FLOAT_TYPES:
        cx.unsupported(node, "Mod of floats")
    fmod = attrs.get("fmod", 0)

    def form(x, y):
        r = f"{x} - {x} / ({y}) * ({y})"  # the remainder of the division toward zero
        return r if fmod else f"{r} + select(({r} != 0) & (({r} < 0) != ({y} < 0)), {y}, 0)"
    return elementwise(cx, node, ins[:2], a.dtype, form)


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
    here = read(cx, x, subs)
    if node.op_type == "LogSoftmax":
        cx.emit(f"{target(cx, out, subs)} = {here} - {mx} - log(sum(exp({at('k')} - {mx})))")
        return [out]
    # The exponentials as a tensor of their own, which the compiler keeps in a local array of
    # the row: each is computed once. The compiler shares a one-statement softmax's exponentials
    # itself only over one reduced index of f32 or f64 (language.md); this also covers a pre-13
    # softmax over several dimensions and f16 / bf16 inputs. In f32 (f64 for f64): a narrow type
    # would round them before the sum.
    e = cx.graph.temporary("f64" if x.dtype == "f64" else "f32", x.shape, "exp")
    cx.emit(f"{target(cx, e, subs)} = exp({here} - {mx})")
    reduced_subs = [f"k{d}" if d in reduced else subs[d] for d in range(x.rank)]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, e, subs)} / sum({read(cx, e, reduced_subs)})")
    return [out]


@op("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def class_loss(cx, node, ins, attrs):
    """ONNX's losses over classes along axis 1 of x ([N, C, d...]) at the targets t ([N, d...]):
    each point's loss is -x[n, t, d...] (SoftmaxCrossEntropyLoss: of x's log-softmax along the
    classes, its optional second output) times the class's weight, 0 where t is ignore_index;
    reduced as `reduction` says: none, sum, or mean (the sum over the weights of the points not
    ignored)."""
    x, t = ins[:2]
    weight = ins[2] if len(ins) > 2 and ins[2] is not None else None
    reduction = attrs.get("reduction", "mean")
    if x.dtype not in FLOAT_TYPES or t.dtype not in ("i32", "i64") or x.rank < 2 or t.rank != x.rank - 1:
        cx.unsupported(node, f"scores of {x.dtype}{list(x.shape)} and targets of {t.dtype}{list(t.shape)}")
    if reduction not in ("none", "sum", "mean"):
        cx.unsupported(node, f"reduction '{reduction}'")
    if node.op_type == "SoftmaxCrossEntropyLoss":
        # log_prob: x - max - log(sum(exp(x - max))) along the classes, a tensor (or the second
        # output) that the loss reads as NegativeLogLikelihoodLoss reads its input.
        scores = x
        x = cx.output(node, 1, scores.dtype, scores.shape) if cx.used(node, 1) else \
            cx.graph.temporary(scores.dtype, scores.shape, "log_prob")
        subs = indices(scores.rank)

        def along(name):
            return read(cx, scores, [subs[0], name, *subs[2:]])
        top = f"max({along('m1')})"
        cx.emit(f"{target(cx, x, subs)} = {read(cx, scores, subs)} - {top} - log(sum(exp({along('k1')} - {top})))")
    n = t.rank
    zero = literal(0, x.dtype)

    def term(names):
        """A point's loss and its weight, the target read at `names`."""
        at = read(cx, t, names)
        kept = f"{at} != {attrs['ignore_index']}" if "ignore_index" in attrs else None
        w = read(cx, weight, [at]) if weight is not None else None
        loss = f"-{read(cx, x, [names[0], at, *names[1:]])}" + (f" * {w}" if w else "")
        if kept:
            return f"select({kept}, {loss}, {zero})", f"select({kept}, {w or literal(1, x.dtype)}, {zero})"
        return loss, w
    if reduction == "none":
        out = cx.output(node, 0, x.dtype, t.shape)
        subs = indices(n)
        cx.emit(f"{target(cx, out, subs)} = {term(subs)[0]}")
        return
    out = cx.output(node, 0, x.dtype, ())
    loss, w = term([f"r{d}" for d in range(n)])
    if reduction == "sum":
        cx.emit(f"{target(cx, out, [])} = sum({loss})")
        return
    total = cx.graph.temporary(x.dtype, (), "loss_sum")
    cx.emit(f"{target(cx, total, [])} = sum({loss})")
    if w is None:  # every point weighs 1
        if any(not isinstance(d, int) for d in t.shape):
            cx.unsupported(node, "a mean over targets whose shape has sizes")
        cx.emit(f"{target(cx, out, [])} = {read(cx, total, [])} / {literal(int(np.prod(t.shape)), x.dtype)}")
        return
    weights = cx.graph.temporary(x.dtype, (), "loss_weights")
    cx.emit(f"{target(cx, weights, [])} = sum({w})")
    cx.emit(f"{target(cx, out, [])} = {read(cx, total, [])} / {read(cx, weights, [])}")


# The reductions other than sum, max, min, mean and prod, written with them: (the reduction,
# the form of each term, the form of the result).
_REDUCE_FORMS = {"ReduceSumSquare": ("sum", "{0} * {0}", "{}"), "ReduceL1": ("sum", "abs({0})", "{}"),
                 "ReduceL2": ("sum", "{0} * {0}", "sqrt({})"), "ReduceLogSum": ("sum", "{0}", "log({})")}


@op("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp", *_REDUCE_FORMS)
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
    term = read(cx, x, x_subs)
    if node.op_type == "ReduceLogSumExp":  # with the largest term taken out, so that no exp overflows
        top = f"max({read(cx, x, [f'm{d}' if d in axes else f'i{d}' for d in range(x.rank)])})"
        text = f"{top} + log(sum(exp({term} - {top})))"
    elif node.op_type in _REDUCE_FORMS:
        fn, each, result = _REDUCE_FORMS[node.op_type]
        text = result.format(f"{fn}({each.format(term)})")
    else:
        text = f"{node.op_type[len('Reduce'):].lower()}({term})"
    cx.emit(f"{target(cx, out, out_subs)} = {text}")
    return [out]


@op("CumSum")
def cum_sum(cx, node, ins, attrs):
    """Sums along a known axis of everything before each point (exclusive) or up to it, or from
    it to the end (reverse): a reduction whose bound follows the point's own index."""
    x = ins[0]
    axis = int(np.asarray(cx.known(node, ins[1], "axis")).reshape(-1)[0])
    axis += x.rank if axis < 0 else 0
    exclusive, reverse = attrs.get("exclusive", 0), attrs.get("reverse", 0)
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)
    i, n = subs[axis], x.shape[axis]
    if reverse:
        at, bound = f"{i} + {1 if exclusive else 0} + r0", f"{n} - {i}" + (" - 1" if exclusive else "")
    else:
        at, bound = "r0", f"{i}" if exclusive else f"{i} + 1"
    term = read(cx, x, subs[:axis] + [at] + subs[axis + 1:])
    cx.emit(f"{target(cx, out, subs)} = sum({term}) where r0 < {bound}")
    return [out]


@op("ArgMax", "ArgMin")
def arg_extreme(cx, node, ins, attrs):
    """The position of the largest (smallest) value along `axis`, as an i64: the first where
    values tie, or the last (select_last_index), read from the end."""
    x = ins[0]
    axis = attrs.get("axis", 0)
    axis += x.rank if axis < 0 else 0
    keep = attrs.get("keepdims", 1)
    shape = tuple(1 if d == axis else x.shape[d] for d in range(x.rank)) if keep else \
        tuple(x.shape[d] for d in range(x.rank) if d != axis)
    last, n = attrs.get("select_last_index", 0), x.shape[axis]
    if last and not isinstance(n, int):
        cx.unsupported(node, "select_last_index along a dimension that is a size")
    out = cx.output(node, 0, "i64", shape)
    x_subs = [(f"{n - 1} - r{d}" if last else f"r{d}") if d == axis else f"i{d}" for d in range(x.rank)]
    out_subs = [f"i{d}" for d in range(x.rank)] if keep else [f"i{d}" for d in range(x.rank) if d != axis]
    text = f"{node.op_type.lower()}({read(cx, x, x_subs)})"
    if last:  # the reversed subscript leaves the reduced index no whole subscript to range over
        text = f"{n - 1} - {text} where r{axis} < {n}"
    cx.emit(f"{target(cx, out, out_subs)} = {text}")
    return [out]


@op("TopK")
def top_k(cx, node, ins, attrs):
    """The k largest (smallest) values along the last axis and their i64 positions: the call
    argsort (stable: among equal values the lower position first, as ONNX asks) into a
    temporary, then its first k positions read."""
    x = ins[0]
    axis = attrs.get("axis", -1)
    axis += x.rank if axis < 0 else 0
    if axis != x.rank - 1:
        cx.unsupported(node, f"axis {axis}: kiln sorts along the last axis")
    k = int(np.asarray(cx.known(node, ins[1], "K")).reshape(-1)[0])
    n = x.shape[axis]
    if not isinstance(n, int) or not 0 <= k <= n:
        cx.unsupported(node, f"K = {k} along a dimension of {n}")
    order = cx.graph.temporary("i32", x.shape, "topk_order")
    cx.emit(f"call argsort({cx.graph.ref(x)}, descending={1 if attrs.get('largest', 1) else 0}) -> {order.kname}")
    shape = x.shape[:-1] + (k,)
    first = slice_into(cx, order, cx.graph.temporary("i32", shape, "topk_first"), [0] * x.rank, [1] * x.rank)
    subs = indices(len(shape))
    at = read(cx, first, subs)
    values = cx.output(node, 0, x.dtype, shape)
    cx.emit(f"{target(cx, values, subs)} = {read(cx, x, subs[:-1] + [at])}")
    outs = [values]
    if cx.used(node, 1):
        positions = cx.output(node, 1, "i64", shape)
        cx.emit(f"{target(cx, positions, subs)} = i64({at})")
        outs.append(positions)
    return outs


def _mean_and_variance(cx, x, reduced, mean, variance):
    """mean = the mean of x over the dimensions in `reduced`, variance = the mean of the squared
    differences from it; both of x's rank, of extent 1 where reduced."""
    subs = indices(x.rank)
    x_r = read(cx, x, [f"r{d}" if d in reduced else subs[d] for d in range(x.rank)])
    m = read(cx, mean, subs)
    cx.emit(f"{target(cx, mean, subs)} = mean({x_r})")
    cx.emit(f"{target(cx, variance, subs)} = mean(({x_r} - {m}) * ({x_r} - {m}))")


@op("LayerNormalization")
def layer_norm(cx, node, ins, attrs):
    """Opset 17's LayerNormalization over the dimensions from `axis` on: the mean, the variance
    (the mean of squared differences), InvStdDev = 1 / sqrt(variance + epsilon), then
    Y = (X - mean) * InvStdDev * Scale + B. Mean and InvStdDev are outputs where the model reads
    them, in the stash type (f32 for narrower floats), else temporaries."""
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    axis = attrs.get("axis", -1)
    axis += x.rank if axis < 0 else 0
    eps = attrs.get("epsilon", 1e-5)
    stash = "f32" if attrs.get("stash_type", 1) == 1 and x.dtype in ("f16", "bf16") else x.dtype
    kept = tuple(x.shape[d] if d < axis else 1 for d in range(x.rank))
    stats = [cx.output(node, i, stash, kept) if cx.used(node, i) else cx.graph.temporary(stash, kept, "layer_norm")
             for i in (1, 2)]
    mean, inv = stats
    subs = indices(x.rank)
    at_stats = [f"i{d}" if d < axis else "0" for d in range(x.rank)]
    variance = cx.graph.temporary(stash, kept, "layer_norm_variance")
    _mean_and_variance(cx, x, range(axis, x.rank), mean, variance)
    cx.emit(f"{target(cx, inv, subs)} = {literal(1.0, stash)} / sqrt({read(cx, variance, subs)} + {literal(eps, stash)})")
    y = cx.output(node, 0, x.dtype, x.shape)
    text = (f"({read(cx, x, subs)} - {read(cx, mean, at_stats)}) * {read(cx, inv, at_stats)} * "
            f"{broadcast_read(cx, scale, x.shape, subs)}")
    if bias is not None:
        text += f" + {broadcast_read(cx, bias, x.shape, subs)}"
    cx.emit(f"{target(cx, y, subs)} = {text}")
    return [y] + [v if cx.used(node, i) else None for i, v in zip((1, 2), stats)]


@op("InstanceNormalization")
def instance_norm(cx, node, ins, attrs):
    """Each image's channel normalized over its points (the mean and the mean of squared
    differences, in f32 for narrower floats), then scaled and shifted per channel."""
    x, scale, bias = ins[:3]
    if x.rank < 3:
        cx.unsupported(node, f"an input of rank {x.rank} (N, C and at least one spatial dimension)")
    eps = attrs.get("epsilon", 1e-5)
    stash = "f32" if x.dtype in ("f16", "bf16") else x.dtype
    kept = tuple(x.shape[d] if d < 2 else 1 for d in range(x.rank))
    mean, variance = (cx.graph.temporary(stash, kept, name) for name in ("instance_norm", "instance_norm_variance"))
    _mean_and_variance(cx, x, range(2, x.rank), mean, variance)
    subs = indices(x.rank)
    at_stats = [subs[0], subs[1]] + ["0"] * (x.rank - 2)
    y = cx.output(node, 0, x.dtype, x.shape)
    cx.emit(f"{target(cx, y, subs)} = ({read(cx, x, subs)} - {read(cx, mean, at_stats)}) / "
            f"sqrt({read(cx, variance, at_stats)} + {literal(eps, stash)}) * {read(cx, scale, [subs[1]])} + "
            f"{read(cx, bias, [subs[1]])}")
    return [y]


@op("EyeLike")
def eye_like(cx, node, ins, attrs):
    x = ins[0]
    if x.rank != 2:
        cx.unsupported(node, f"an input of rank {x.rank} (EyeLike takes matrices)")
    dtype = cx.kiln_type(node, attrs["dtype"]) if "dtype" in attrs else x.dtype
    out = cx.output(node, 0, dtype, x.shape)
    cx.emit(f"{target(cx, out, ['i0', 'i1'])} = select(i1 - i0 == {attrs.get('k', 0)}, 1, 0)")
    return [out]


@op("Range")
def range_(cx, node, ins, attrs):
    """A Range whose limit is a size (PyTorch's arange(T) over a dynamic sequence): from 0 in
    steps of 1, out[i] = i. A Range of known numbers was folded at import."""
    start, limit, delta = (cx.known(node, v, name, symbolic=True) for v, name in zip(ins, ("start", "limit", "delta")))
    if start.reshape(-1)[0] != 0 or delta.reshape(-1)[0] != 1 or not isinstance(limit.reshape(-1)[0], str):
        cx.unsupported(node, "a Range over a size that does not start at 0 in steps of 1")
    out = cx.output(node, 0, ins[0].dtype, (limit.reshape(-1)[0],))
    cx.emit(f"{target(cx, out, ['i0'])} = {ins[0].dtype}(i0)")
    return [out]


# Besides the elementwise operators (_emit.ELEMENTWISE), those whose first operand may have a
# dimension that a Reshape declared as its parts (Value.product_shape).
FIRST_OPERAND_OF = {"Gemm", "MatMul", "Reshape"}

# The operators of the other modules register themselves in OPS when imported.
from . import _conv, _movement, _products, _recurrent  # noqa: E402

REGISTERED_ELSEWHERE = (_conv, _movement, _products, _recurrent)
__all__ = ["OPS", "FIRST_OPERAND_OF"]

