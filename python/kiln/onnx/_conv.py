"""Convolutions, pooling and the normalizations around them (docs/onnx.md, "Convolutions")."""

import math

import numpy as np

from ._emit import affine, indices, literal, op, read, target
from ._graph import FLOAT_TYPES, numpy_type
from ._movement import place_side_by_side

# A depthwise window of at most this many taps is written out term by term (depthwise_taps).
_MAX_WRITTEN_TAPS = 49

# An f32 convolution whose product is at least this deep (input channels per group times the
# window's taps) gets its known weights in blocks of 16 output channels, each block's channel last
# (conv2d's transpose_w=16; transpose_w=1, the output channel last, where a group's output
# channels do not fill whole blocks), for which the cpu device's tiles run along output channels:
# on ResNet-50's layers at batch 1 (2026-12-02, one thread, best of 4 x 30 runs each) those were
# 0.84-0.97x the time of the tiles along points from depth 512 on (3x3 windows from 64 channels,
# 1x1 from 512), level at 256 and 1.14-1.15x at 64-128 (1x1 windows into 4x the channels, whose
# sums are few and short). On images of at most 7 x 7 output points, whose tiles along points
# leave a quarter of their lanes idle (49 points in 64), from depth 256 on: 1x1 windows from 256
# to 1024 channels and from 320 to 1280 over 7 x 7 took 0.92x and 0.86x the time in blocks
# (2026-12-03, one thread, medians of 300 in five alternating rounds), where over 14 x 14 (196
# points in 224 lanes) they measured level.
# Whether graphs may keep their data in blocks of 16 channels between convolutions
# (data_in_blocks); the tests import models both ways.
_DATA_IN_BLOCKS = True

_OUTPUT_LAST_DEPTH = 512
_OUTPUT_LAST_DEPTH_SMALL_IMAGES = 256
_SMALL_IMAGE_POINTS = 49

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
    auto_pad = attrs.get("auto_pad", "NOTSET")
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
    depthwise = group == x.shape[1] and w.shape[0] == group and w.shape[1] == 1
    # f64 depthwise windows are written out tap by tap (conv2d runs them through the direct loops).
    written_out = depthwise and x.dtype == "f64" and math.prod(kernel) <= _MAX_WRITTEN_TAPS
    if x.rank == 4 and x.dtype in ("f32", "f64") and not written_out:
        return conv2d_call(cx, node, x, w, b, group, (strides, dilations, pads, spatial))
    out = cx.output(node, 0, x.dtype, (x.shape[0], w.shape[0], *spatial))
    n = x.rank - 2
    o_subs = indices(2 + n)
    reads = [affine([(strides[d], f"i{2 + d}"), (dilations[d], f"r{1 + d}")], -pads[d]) for d in range(n)]
    w_window = [f"r{1 + d}" for d in range(n)]
    if group == 1:
        x_read = read(cx, x, ["i0", "r0", *reads])
        w_read = read(cx, w, ["i1", "r0", *w_window])
    elif depthwise:
        if x.rank == 4:
            return depthwise_taps(cx, x, w, b, strides, dilations, pads, out)
        x_read = read(cx, x, ["i0", "i1", *reads])  # depthwise: output channel o reads channel o
        w_read = read(cx, w, ["i1", "0", *w_window])
    else:
        return grouped_conv(cx, node, x, w, b, group, out, (strides, dilations, pads), w_window)
    text = f"sum({x_read} * {w_read})"
    if b is not None:
        text += f" + {read(cx, b, ['i1'])}"
    cx.emit(f"{target(cx, out, o_subs)} = {text}")
    return [out]


@op("ConvTranspose")
def conv_transpose(cx, node, ins, attrs):
    """y[n, o, p...] = b[o] + the sum over the group's input channels c and the taps k... with
    p = i · stride + k · dilation - pad (each spatial dimension) of x[n, c, i...] · w[c, o, k...]:
    each output point reads the taps that reach it through known tables, per spatial dimension,
    of their kernel positions and input positions (at most ceil(kernel / stride) of them); a
    table's entries past a point's own taps are masked out by a third table, not read out of
    range, so that --check-bounds has nothing to say about them."""
    x, w = ins[:2]
    b = ins[2] if len(ins) > 2 else None
    if x.rank < 3 or w.rank != x.rank:
        cx.unsupported(node, f"an input of rank {x.rank} and weights of rank {w.rank}")
    if x.dtype not in FLOAT_TYPES:
        cx.unsupported(node, f"{x.dtype} operands")
    n = x.rank - 2
    if any(not isinstance(d, int) for d in x.shape[1:]) or any(not isinstance(d, int) for d in w.shape):
        cx.unsupported(node, "channels or spatial dimensions that are sizes")
    group = attrs.get("group", 1)
    kernel = list(w.shape[2:])
    if list(attrs.get("kernel_shape", kernel)) != kernel:
        cx.unsupported(node, f"kernel_shape {list(attrs['kernel_shape'])} against weights of {kernel}")
    per_in, per_out = x.shape[1] // group, w.shape[1]
    if x.shape[1] % group or w.shape[0] != x.shape[1]:
        cx.unsupported(node, f"group={group} with {x.shape[1]} input channels and weights of {list(w.shape)}")
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    extra = list(attrs.get("output_padding", [0] * n))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    given = attrs.get("output_shape")
    pads = list(attrs.get("pads", [0] * (2 * n)))
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    if given is not None and len(given) == n + 2:
        given = given[2:]
    begin, spatial = [], []
    for d in range(n):
        natural = strides[d] * (x.shape[2 + d] - 1) + extra[d] + (kernel[d] - 1) * dilations[d] + 1
        if given is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # ONNX's rule: the padding that gives the output's extent, split as auto_pad says
            # (the start gets the smaller half for SAME_UPPER, the larger otherwise); an extent
            # past the natural one pads nothing and leaves its end to the bias, as ONNX Runtime.
            extent = int(given[d]) if given is not None else x.shape[2 + d] * strides[d]
            total = max(0, natural - extent)
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        else:
            extent = natural - pads[d] - pads[d + n]
            begin.append(pads[d])
        if extent < 1:
            cx.unsupported(node, f"an empty output along spatial dimension {d}")
        spatial.append(extent)
    out = cx.output(node, 0, x.dtype, (x.shape[0], per_out * group, *spatial))
    tables = []  # per spatial dimension: [kernel positions, input positions, kept] by (point, tap)
    for d in range(n):
        reach = []
        for p in range(spatial[d]):
            at = [(k, p + begin[d] - k * dilations[d]) for k in range(kernel[d])]
            reach.append([(k, i // strides[d]) for k, i in at
                          if i % strides[d] == 0 and 0 <= i // strides[d] < x.shape[2 + d]])
        table = np.zeros((3, spatial[d], max(1, max(len(r) for r in reach))), np.int32)
        for p, r in enumerate(reach):
            for t, (k, i) in enumerate(r):
                table[:, p, t] = (k, i, 1)
        tables.append(table)
    if group > 1 and b is not None and b.const is None:
        cx.unsupported(node, f"group={group} with a bias the model computes")
    if group == 1 and w.const is not None and x.dtype in ("f32", "f64") and n <= 2:
        return [_conv_transpose_through_columns(cx, x, w, b, out, tables)]
    taps = [_tap_table(cx, t[0], d) for d, t in enumerate(tables)]
    reads = [_tap_table(cx, t[1], d) for d, t in enumerate(tables)]
    kept = _kept(cx, tables)
    zero = literal(0, x.dtype)
    subs = indices(out.rank)
    parts = []
    for g in range(group):
        part = out if group == 1 else cx.graph.temporary(x.dtype, (out.shape[0], per_out, *spatial), "group")
        # A group's input channels at its offset, through a sum over one point (q0 < 1) as
        # grouped_conv reads them: at offset 0 the subscript would otherwise be r0 alone.
        channel = "r0" if group == 1 else affine([(1, "r0"), (-1, "q0")], g * per_in)
        product = f"{read(cx, x, ['i0', channel, *reads])} * {read(cx, w, [channel, 'i1', *taps])}"
        text = f"sum(select({kept} == {n}, {product}, {zero}))"
        if b is not None:
            bias = b if group == 1 else cx.constant(np.ascontiguousarray(b.const[g * per_out:(g + 1) * per_out]),
                                                    "group_bias")
            text += f" + {read(cx, bias, ['i1'])}"
        cx.emit(f"{target(cx, part, subs)} = {text}" + (f" where q0 < 1, r0 < {per_in}" if group > 1 else ""))
        parts.append(part)
    if group > 1:
        place_side_by_side(cx, out, parts, 1)
    return [out]


def _tap_table(cx, table, d, tap=None):
    """Spatial dimension d's known table (point, tap) read at output index i{2 + d} and tap r{1 + d}
    (or `tap`)."""
    return read(cx, cx.index_table(table), [f"i{2 + d}", tap or f"r{1 + d}"])


def _kept(cx, tables):
    """The number of spatial dimensions in which a (point, taps) entry is one of the point's own."""
    return " + ".join(_tap_table(cx, t[2], d) for d, t in enumerate(tables))


def _conv_transpose_through_columns(cx, x, w, b, out, tables):
    """ConvTranspose in one group with known f32 or f64 weights: the columns, every input point's
    contribution to each (output channel, kernel position), are a product that the compiler makes
    a gemm call (the input with its channels first, by the weights as [C, O · taps]); each output
    point then sums the columns of the taps that reach it (conv_transpose's tables)."""
    n = x.rank - 2
    taps = int(np.prod(w.shape[2:]))
    weights = cx.constant(np.ascontiguousarray(w.const.reshape(w.shape[0], -1)), "transposed_conv_weights")
    channels_first = cx.graph.temporary(x.dtype, (x.shape[1], x.shape[0], *x.shape[2:]), "channels_first")
    subs = indices(x.rank)
    cx.emit(f"{target(cx, channels_first, subs)} = {read(cx, x, [subs[1], subs[0], *subs[2:]])}")
    columns = cx.graph.temporary(x.dtype, (weights.shape[1], x.shape[0], *x.shape[2:]), "columns")
    cx.emit(f"{target(cx, columns, subs)} = sum({read(cx, weights, ['r0', 'i0'])} * "
            f"{read(cx, channels_first, ['r0', *subs[1:]])})")
    # A tap's column: its output channel times the taps, plus its kernel position in row-major
    # order (each spatial dimension's table of kernel positions scaled by the extents after it).
    # Where every output point has as many taps as the tables hold, none is masked out, and where
    # that is one tap (a kernel as wide as its stride: U-Net's up-convolutions), nothing is summed.
    every = all(t[2].all() for t in tables)
    single = every and all(t.shape[2] == 1 for t in tables)
    tap = "0" if single else None
    row = [affine([(taps, "i1")])]
    after = taps
    for d in range(n):
        after //= w.shape[2 + d]
        row.append(_tap_table(cx, (tables[d][0] * after).astype(np.int32), d, tap))
    at = [" + ".join(row), "i0", *(_tap_table(cx, tables[d][1], d, tap) for d in range(n))]
    text = read(cx, columns, at) if single else f"sum({read(cx, columns, at)})" if every else \
        f"sum(select({_kept(cx, tables)} == {n}, {read(cx, columns, at)}, {literal(0, x.dtype)}))"
    if b is not None:
        text += f" + {read(cx, b, ['i1'])}"
    cx.emit(f"{target(cx, out, indices(out.rank))} = {text}")
    return out


def conv2d_call(cx, node, x, w, b, group, window):
    """A 2-D convolution of f32 or f64 tensors as kiln's conv2d call (docs/onnx.md,
    "Convolutions"), with what alone reads its output folded into it: a BatchNormalization, or a
    Mul and then an Add by known per-channel values (channel_affine), into the weights and the
    bias where they are known, then an Add of a tensor of its shape computed
    before it into the call's residual z, then a Relu into the call's relu=1, or a Clip from 0 (or
    below everything) to a known bound into relu=1 (or 0) and clip_max (MobileNet's ReLU6)."""
    strides, dilations, pads, spatial = window
    known = w.const is not None and (b is None or b.const is not None)
    norm = cx.only_reader(node, "BatchNormalization") if known else None
    if norm is not None and not all(cx.values.get(v) is not None and cx.values[v].const is not None
                                    for v in norm.input[1:5]):
        norm = None  # statistics the model computes: the normalization stays a statement of its own
    dt = numpy_type(x.dtype)
    # y = conv * factor + shift per channel, from the nodes folded in (`scaling`).
    factor, shift, scaling = np.ones(w.shape[0]), np.zeros(w.shape[0]), []
    if norm is not None:
        factor, shift = normalization_affine(*(cx.values[v].const for v in norm.input[1:5]), cx.attributes(norm))
        scaling = [norm]
    if known:
        then_factor, then_shift, more = channel_affine(cx, scaling[-1] if scaling else node, x.dtype, w.shape[0])
        factor, shift, scaling = factor * then_factor, shift * then_factor + then_shift, scaling + more
    folded = None  # the weights with the folded nodes' factors, declared below in their layout
    if scaling:
        bias = np.zeros(w.shape[0]) if b is None else b.const.astype(np.float64)
        folded = (w.const.astype(np.float64) * factor.reshape(-1, 1, 1, 1)).astype(dt)
        b = cx.constant((bias * factor + shift).astype(dt), "conv_bias")
    elif b is None:
        b = cx.constant(np.zeros(w.shape[0], dt), "conv_bias")
    last = scaling[-1] if scaling else node
    shape = (x.shape[0], w.shape[0], *spatial)
    add, z = residual_add(cx, last, x.dtype, shape)
    if add is not None:
        last = add
    act, relu, clip_max = cx.only_reader(last, "Relu"), 1, None
    if act is None:
        act = cx.only_reader(last, "Clip")
        bounds = clip_bounds(cx, act) if act is not None else None
        act, (relu, clip_max) = (act, bounds) if bounds is not None else (None, (0, None))
    if act is not None:
        last = act
    else:
        relu = 0
    # Over data in blocks of 16 channels where the graph keeps them so (data_in_blocks); a first
    # layer of fewer channels (an image's 3) reads its input as it is, in NCHW.
    depthwise = w.shape[0] == group and w.shape[1] == 1
    blocked = cx.blocked_data and x.dtype == "f32" and (group == 1 or depthwise) and w.const is not None
    out = cx.blocked_output(last, 0, x.dtype, shape) if blocked else cx.output(last, 0, x.dtype, shape)
    cx.absorb(n for n in (*scaling, add, act) if n is not None)
    # The end pads the windows reach into (ONNX's may be larger, with points no window reads).
    ends = [max(0, (o - 1) * st + dl * (k - 1) + 1 - size - p)
            for o, st, dl, k, size, p in zip(spatial, strides, dilations, w.shape[2:], x.shape[2:], pads)]
    attributes = [("stride_h", strides[0], 1), ("stride_w", strides[1], 1), ("pad_top", pads[0], 0),
                  ("pad_left", pads[1], 0), ("pad_bottom", ends[0], 0), ("pad_right", ends[1], 0),
                  ("dilation_h", dilations[0], 1), ("dilation_w", dilations[1], 1), ("groups", group, 1),
                  ("relu", relu, 0), ("clip_max", clip_max, None)]
    deep = _OUTPUT_LAST_DEPTH_SMALL_IMAGES if math.prod(spatial) <= _SMALL_IMAGE_POINTS else _OUTPUT_LAST_DEPTH
    if blocked:
        w = cx.constant(output_blocks(w.const if folded is None else folded), "conv_weights_output_blocks")
        as_is = x.blocked is None and isinstance(x.shape[1], int) and x.shape[1] < 16 and group == 1
        args = [cx.graph.ref(v) for v in (x if as_is else cx.blocked(x), w, b, None if z is None else cx.blocked(z))
                if v is not None]
        args += [f"{name}={v}" for name, v, default in attributes if v != default]
        cx.emit(f"call conv2d_blocked({', '.join(args)}) -> {out.blocked.kname}")
        return [out]
    if x.dtype == "f32" and w.const is not None and math.prod(w.shape[1:]) >= deep and not depthwise:
        values = w.const if folded is None else folded
        if group == 1 or (values.shape[0] // group) % 16 == 0:
            w = cx.constant(output_blocks(values), "conv_weights_output_blocks")
            attributes.append(("transpose_w", 16, 0))
        else:
            w = cx.constant(np.ascontiguousarray(values.transpose(1, 2, 3, 0)), "conv_weights_output_last")
            attributes.append(("transpose_w", 1, 0))
    elif folded is not None:
        w = cx.constant(np.ascontiguousarray(folded), "conv_weights")
    args = [cx.graph.ref(v) for v in (x, w, b, z) if v is not None]
    args += [f"{name}={v}" for name, v, default in attributes if v != default]
    cx.emit(f"call conv2d({', '.join(args)}) -> {out.kname}")
    return [out]


def data_in_blocks(model):
    """Whether the importer keeps the data between the graph's f32 convolutions in blocks of 16
    channels (conv2d_blocked, Value.blocked): where every Conv has one group or is depthwise (its
    weights an initializer [group, 1, KH, KW]) and no Concat or Split would take the blocks apart
    again. The cpu device runs such convolutions in 0.55-0.9x the time of conv2d over NCHW
    (ResNet-50's layers at batch 16, 2026-12-03: docs/ral.md); every other reader gets the tensor
    in NCHW, computed once from the blocks."""
    nodes = model.graph.node
    shapes = {init.name: list(init.dims) for init in model.graph.initializer}

    def blockable(node):
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        w = shapes.get(node.input[1]) if len(node.input) > 1 else None
        return group == 1 or (w is not None and len(w) == 4 and w[0] == group and w[1] == 1)
    convs = [n for n in nodes if n.op_type == "Conv"]
    return _DATA_IN_BLOCKS and bool(convs) and all(blockable(n) for n in convs) and \
        not any(n.op_type in ("Concat", "Split") for n in nodes)


def output_blocks(values):
    """Weights [O, C/groups, KH, KW] as conv2d's transpose_w=16 takes them: [ceil(O/16), C/groups,
    KH, 16·KW], w[o // 16, c, a, 16·e + o % 16] = values[o, c, a, e], the last block's channels past
    O zero."""
    o, c, kh, kw = values.shape
    blocks = -(-o // 16)
    padded = np.zeros((blocks * 16, c, kh, kw), values.dtype)
    padded[:o] = values
    by_block = padded.reshape(blocks, 16, c, kh, kw).transpose(0, 2, 3, 4, 1)
    return np.ascontiguousarray(by_block.reshape(blocks, c, kh, kw * 16))


def clip_bounds(cx, clip):
    """(relu, clip_max) for conv2d where a Clip's bounds are known and its lower one is 0 (relu=1)
    or absent (relu=0); clip_max None where it has no upper one. None where it cannot fold."""
    if cx.opset < 11:
        attrs = cx.attributes(clip)
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        names = (list(clip.input[1:3]) + ["", ""])[:2]
        bound = [cx.constant_value(name) if name else None for name in names]
        if any(name and b is None for name, b in zip(names, bound)):
            return None  # a bound the model computes
        lo, hi = (None if b is None else float(np.asarray(b).item()) for b in bound)
    if lo is not None and lo != 0 and lo > -np.finfo(np.float32).max:
        return None
    if hi is not None and hi == np.inf:
        hi = None
    if hi is not None and (not np.isfinite(hi) or (lo == 0 and hi < 0)):
        return None
    return (1 if lo == 0 else 0), hi


def channel_affine(cx, node, dtype, channels):
    """(factor, shift, [the nodes]) in f64 where the one node that reads `node`'s output
    multiplies it by known values, one per channel (shaped [C, 1, 1], [1, C, 1, 1] or a single
    value), and the one that reads the product (or `node`'s output, without such a Mul) adds
    known values so shaped: a normalization's scale and shift written as a multiply and an add
    (Inception v2's, after its BatchNormalization). (1, 0, []) where neither is there."""
    factor, shift, nodes, last = np.ones(channels), np.zeros(channels), [], node
    for op_type in ("Mul", "Add"):
        reader = _reader_with_known_operand(cx, last, op_type)
        values = None if reader is None else _per_channel(reader[1], dtype, channels)
        if values is None:
            continue
        if op_type == "Mul":
            factor = values
        else:
            shift = values
        nodes.append(reader[0])
        last = reader[0]
    return factor, shift, nodes


def _binary_reader(cx, node, op_types):
    """(the reader, the name of its other operand) where the one node that reads `node`'s output
    (which the graph does not output) is an `op_types` node of two operands, it once among them;
    else (None, None)."""
    name = node.output[0]
    readers = cx.reader_nodes.get(name, [])
    if len(readers) != 1 or name in cx.outputs:
        return None, None
    reader = readers[0]
    if reader.op_type not in op_types or len(reader.input) != 2 or list(reader.input).count(name) != 1:
        return None, None
    return reader, reader.input[1] if reader.input[0] == name else reader.input[0]


def _reader_with_known_operand(cx, node, op_type):
    """(the reader, the other operand's Value) where the one node that reads `node`'s output is
    an `op_type` node of it and a known tensor; else None."""
    reader, other = _binary_reader(cx, node, (op_type,))
    known = cx.known_value(other) if reader is not None else None
    return (reader, known) if known is not None else None


def _per_channel(value, dtype, channels):
    """The f64 values, one per channel, of a known tensor of `dtype` that broadcasts against
    [N, C, H, W] along C alone (or is one value); None for any other."""
    a = value.const
    if value.dtype != dtype:
        return None
    if a.size == 1:
        return np.full(channels, a.reshape(-1)[0], dtype=np.float64)
    if a.ndim in (3, 4) and a.shape[-3] == channels and a.size == channels:
        return a.reshape(channels).astype(np.float64)
    return None


def residual_add(cx, node, dtype, shape):
    """(the Add, its other operand) where the one node that reads `node`'s output is an Add (or
    a Sum of two) of it and a tensor of the same type and shape that an earlier node computed (a
    residual connection); else (None, None)."""
    add, other = _binary_reader(cx, node, ("Add", "Sum"))
    z = cx.values.get(other) if add is not None else None
    if z is None or z.dtype != dtype or tuple(z.shape) != tuple(shape):
        return None, None
    return add, z


def depthwise_taps(cx, x, w, b, strides, dilations, pads, out):
    """A 2-D depthwise convolution (output channel o reads input channel o) as one sum written
    out tap by tap: each term reads the input at offsets that are constants of the tap, so the
    compiler's border splitting leaves the interior without range checks (docs/optimize.md);
    a `sum` over the window would check the range at every tap."""
    terms = []
    for kh in range(w.shape[2]):
        for kw in range(w.shape[3]):
            rows = affine([(strides[0], "i2")], dilations[0] * kh - pads[0])
            cols = affine([(strides[1], "i3")], dilations[1] * kw - pads[1])
            terms.append(f"{read(cx, x, ['i0', 'i1', rows, cols])} * {read(cx, w, ['i1', '0', str(kh), str(kw)])}")
    if b is not None:
        terms.append(read(cx, b, ["i1"]))
    cx.emit(f"{target(cx, out, indices(4))} = {' + '.join(terms)}")
    return [out]


def grouped_conv(cx, node, x, w, b, group, out, reads, w_window):
    """A convolution in `group` groups that conv2d does not take (not 2-D, or of a narrow float
    type): each group's output channels into a tensor of their own, as a loop nest over the
    group's slice of the (known) weights whose input channels are read at the group's offset
    through a sum over one point (q0 < 1), as Concat reads its parts; then those placed side by
    side as Concat places its parts."""
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
        w_g = np.ascontiguousarray(w.const[g * per_out:(g + 1) * per_out])
        b_g = None if b is None else cx.constant(np.ascontiguousarray(b.const[g * per_out:(g + 1) * per_out]),
                                                 "group_bias")
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
    n = x.rank - 2
    # A max pool over a tensor held in blocks only pools the blocks, one statement of its taps: each
    # tap a whole vector of 16 lanes at any stride, so the two passes below (for strided columns)
    # would only add a pass over memory.
    taps = window_taps(cx, x.blocked, kernel, strides, dilations, pads, spatial, True) \
        if node.op_type == "MaxPool" and x.blocked is not None and x.kname is None and n == 2 and \
        math.prod(kernel) <= _MAX_WRITTEN_TAPS else None
    if taps is not None:
        out = cx.blocked_output(node, 0, x.dtype, (*x.shape[:2], *spatial))
        cx.emit(f"{target(cx, out.blocked, indices(5))} = {taps}")
        return [out]
    out = cx.output(node, 0, x.dtype, (*x.shape[:2], *spatial))
    o_subs = indices(2 + n)
    reads = [affine([(strides[d], f"i{2 + d}"), (dilations[d], f"r{d}")], -pads[d]) for d in range(n)]
    x_read = read(cx, x, ["i0", "i1", *reads])
    bounds = " where " + ", ".join(f"r{d} < {kernel[d]}" for d in range(n))
    # A 2-D window of floats is written out tap by tap, as depthwise_taps does and for its reason.
    written_out = n == 2 and x.dtype in ("f16", "bf16", "f32", "f64") and math.prod(kernel) <= _MAX_WRITTEN_TAPS
    taps = window_taps(cx, x, kernel, strides, dilations, pads, spatial, node.op_type == "MaxPool") \
        if written_out else None
    if node.op_type == "MaxPool":
        if taps is not None and min(kernel) > 1:
            return [separable_max_pool(cx, x, out, kernel, strides, dilations, pads, spatial)]
        text = taps if taps is not None else f"max({x_read}){bounds}"
        cx.emit(f"{target(cx, out, o_subs)} = {text}")
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
    total = f"({taps})" if taps is not None else f"sum({x_read})"
    if np.all(counts == counts.flat[0]):
        text = f"{total} / {literal(counts.flat[0], x.dtype)}"
    else:
        count = cx.constant(counts.astype(np.float32 if x.dtype != "f64" else np.float64), "pool_count")
        text = f"{total} / {read(cx, count, o_subs[2:])}"
    cx.emit(f"{target(cx, out, o_subs)} = {text}{bounds if taps is None else ''}")
    return [out]


def separable_max_pool(cx, x, out, kernel, strides, dilations, pads, spatial):
    """A 2-D max pool as two passes, each a max over one dimension's taps (window_taps' terms, of a
    window one tap wide in the other): down the rows into a tensor of the output's rows by the
    input's columns, whose loads run along whole input rows, then across its columns. Written as
    one statement of KH · KW taps, the taps' columns at the stride do not go into vectors: ResNet's
    3x3 window at stride 2 over 64 x 112 x 112 took 0.98 ms that way, 0.29 ms in two passes
    (2026-12-03, one thread; ONNX Runtime 0.19 ms). The maximum of a window is the maximum of its
    rows' maxima, NaN included."""
    rows = cx.graph.temporary(x.dtype, (*x.shape[:2], spatial[0], x.shape[3]), "pool_rows")
    down = window_taps(cx, x, [kernel[0], 1], [strides[0], 1], [dilations[0], 1], [pads[0], 0],
                       [spatial[0], x.shape[3]], True)
    across = window_taps(cx, rows, [1, kernel[1]], [1, strides[1]], [1, dilations[1]], [0, pads[1]],
                         [spatial[0], spatial[1]], True)
    cx.emit(f"{target(cx, rows, indices(4))} = {down}")
    cx.emit(f"{target(cx, out, indices(4))} = {across}")
    return out


def window_taps(cx, x, kernel, strides, dilations, pads, spatial, maximum):
    """A 2-D pool's window over x written out tap by tap, each term reading x at constant offsets
    (the compiler's border splitting then frees the interior of range checks, which it cannot do
    for a reduction over the window: docs/optimize.md): the sum of the taps, where a tap outside
    x reads 0 as the reduction leaves it out; or their max, folded in the reduction's order, a tap
    that can leave x under a select of the comparisons that fail there, -inf outside. None where
    a tap would read x at an output index alone in a dimension of another extent (a window as large
    as the input, at stride 1), which the language refuses."""
    terms = []
    for a in range(kernel[0]):
        for e in range(kernel[1]):
            subs, inside = ["i0", "i1"], []
            for d, k in ((0, a), (1, e)):
                at = affine([(strides[d], f"i{2 + d}")], dilations[d] * k - pads[d])
                if at == f"i{2 + d}" and spatial[d] != x.shape[2 + d]:
                    return None
                first, last = dilations[d] * k - pads[d], strides[d] * (spatial[d] - 1) + dilations[d] * k - pads[d]
                inside += ([f"{at} >= 0"] if first < 0 else []) + ([f"{at} < {x.shape[2 + d]}"] if last >= x.shape[2 + d] else [])
                subs.append(at)
            term = read(cx, x, subs + ["i4"] * (x.rank == 5))  # in blocks: the lane as it is
            if maximum and inside:
                term = f"select({' & '.join(f'({c})' for c in inside)}, {term}, -inf)"
            terms.append(term)
    if not maximum:
        return " + ".join(terms)
    text = terms[0]
    for term in terms[1:]:
        text = f"max({text}, {term})"
    return text


@op("GlobalAveragePool", "GlobalMaxPool")
def global_pool(cx, node, ins, attrs):
    x = ins[0]
    n = x.rank - 2
    out = cx.output(node, 0, x.dtype, (*x.shape[:2], *([1] * n)))
    fn = "mean" if node.op_type == "GlobalAveragePool" else "max"
    x_read = read(cx, x, ["i0", "i1", *[f"r{d}" for d in range(n)]])
    cx.emit(f"{target(cx, out, indices(2 + n))} = {fn}({x_read})")
    return [out]


def normalization_affine(scale, bias, mean, var, attrs):
    """BatchNormalization's y = (x - mean) / sqrt(var + epsilon) * scale + B as one multiply and
    add per channel, y = x * factor + shift: (factor, shift) in f64."""
    factor = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + attrs.get("epsilon", 1e-5))
    return factor, bias.astype(np.float64) - mean.astype(np.float64) * factor


@op("BatchNormalization")
def batch_norm(cx, node, ins, attrs):
    x = ins[0]
    if any(cx.used(node, i) for i in range(1, len(node.output))):
        cx.unsupported(node, "training outputs (kiln imports models for inference)")
    a, b = normalization_affine(*(cx.known(node, v, name) for v, name in
                                  zip(ins[1:5], ("scale", "B", "input_mean", "input_var"))), attrs)
    dt = np.float64 if x.dtype == "f64" else np.float32
    av, bv = cx.constant(a.astype(dt), "bn_scale"), cx.constant(b.astype(dt), "bn_shift")
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, subs)} * {read(cx, av, ['i1'])} + {read(cx, bv, ['i1'])}")
    return [out]


@op("LRN")
def lrn(cx, node, ins, attrs):
    x = ins[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    out = cx.output(node, 0, x.dtype, x.shape)
    subs = indices(x.rank)
    half = (size - 1) // 2
    t = x.dtype
    if size <= _MAX_WRITTEN_TAPS:
        # The window's squares written out term by term (a channel outside x reads 0, as the sum
        # leaves it out), for the reason depthwise_taps gives; AlexNet's and GoogLeNet's beta of
        # 0.75 as two square roots, which vectorize where pow is a call per point.
        squares = []
        for k in range(size):
            sq = read(cx, x, [subs[0], affine([(1, "i1")], k - half), *subs[2:]])
            squares.append(f"{sq} * {sq}")
        base, bounds = f"({literal(bias, t)} + {literal(alpha / size, t)} * ({' + '.join(squares)}))", ""
    else:
        sq = read(cx, x, [subs[0], affine([(1, "i1"), (1, "r0")], -half), *subs[2:]])
        base, bounds = f"({literal(bias, t)} + {literal(alpha / size, t)} * sum({sq} * {sq}))", f" where r0 < {size}"
    power = {0.5: f"sqrt({base})", 0.75: f"sqrt({base} * sqrt({base}))", 1.0: base}.get(float(beta),
                                                                                    f"pow({base}, {literal(beta, t)})")
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, subs)} / {power}{bounds}")
    return [out]
