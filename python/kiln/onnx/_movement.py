"""Operators that move data: transposes, reshapes, concatenation, slices, padding, gathers
(docs/onnx.md)."""

import itertools

import numpy as np

from ._emit import affine, broadcast_read, broadcast_shape, indices, literal, op, read, target
from ._dims import count, dimension, divides, expression, factors, monomial, quotient, times
from ._graph import Value

# --- moving data -----------------------------------------------------------------------------

@op("Transpose")
def transpose(cx, node, ins, attrs):
    x = ins[0]
    perm = list(attrs.get("perm", reversed(range(x.rank))))
    if x.rank >= 2 and perm[-2] == x.rank - 1 and x.product_shape is None and \
            cx.read_only_as(node.output[0], "MatMul", 1):
        # Read only as a product's right operand whose rows (its last dimension but one) are the
        # input's last: stored with the last two dimensions swapped, so that the copy moves whole
        # rows of the input (no copy at all where that is the input's order, K^T of attention)
        # and the product reads it transposed, as gemm's transpose_b.
        stored = perm[:-2] + [perm[-1], perm[-2]]
        out = Value(node.output[0], x.dtype, tuple(x.shape[p] for p in perm))
        out.transposed = x if stored == list(range(x.rank)) else \
            cx.graph.temporary(x.dtype, tuple(x.shape[p] for p in stored), "transposed")
        if out.transposed is not x:
            _permuted_copy(cx, x, out.transposed, stored)
        cx.values[node.output[0]] = out
        return [out]
    out = cx.output(node, 0, x.dtype, tuple(x.shape[p] for p in perm))
    _permuted_copy(cx, x, out, perm)
    return [out]


def _permuted_copy(cx, x, out, perm):
    """out[i...] = x read with its dimension perm[j] at out's index j."""
    subs = indices(x.rank)
    x_subs = [None] * x.rank
    for j, p in enumerate(perm):
        x_subs[p] = subs[j]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")


def _groups(a, b):
    """Pairs (dims of a, dims of b) whose extents multiply to the same, in order, over shapes
    without dimensions of extent 1; where a product has a size (a monomial, _dims), the smaller
    is the one that divides the other whatever the sizes. None where there are none."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        gi, gj, pa, pb = [i], [j], monomial(a[i]), monomial(b[j])
        i, j = i + 1, j + 1
        while pa != pb:
            if pa[0] < pb[0] if not pa[1] and not pb[1] else divides(pa, pb):
                if i >= len(a):
                    return None
                pa, i = times(pa, a[i]), i + 1
                gi.append(i - 1)
            elif (pa[1] or pb[1]) and not divides(pb, pa):
                return None
            else:
                if j >= len(b):
                    return None
                pb, j = times(pb, b[j]), j + 1
                gj.append(j - 1)
        out.append((gi, gj))
    return out if i == len(a) and j == len(b) else None


def _table(cx, values, subscript):
    """A known table of `values` (integers: positions, quotients, remainders) read at `subscript`."""
    return read(cx, cx.index_table(np.asarray(values).astype(np.int32)), [subscript])


def _position(at, extent, dtype):
    """A position read from an index tensor (`at`, of `dtype`), counted from the end where it is
    negative, as ONNX's gathers count (along a dimension that is a number)."""
    return f"{at} + {extent} * {dtype}({at} < 0)" if isinstance(extent, int) else at


def _strides(shape):
    """The strides of a row-major shape's dimensions and its element count, as monomials."""
    out, s = [], (1, ())
    for e in reversed(shape):
        out.append(s)
        s = times(s, e)
    return out[::-1], s


def _ascending(m):
    """A sort key that orders monomials that divide one another from the smallest."""
    return len(m[1]), m[0], m[1]


def _split_at_sizes(a, b):
    """Shape `b` with a dimension split where a dimension of shape `a` (the same elements in
    row-major order) begins inside it at a multiple of a size of its stride: an index into `b`
    would be divided by that size to reach `a`'s, which no subscript can do (T x 4B x 64 to TB x
    256 rows: b's rows split into T and B). Each piece lies in one dimension of `a`, so it has at
    most one size; where one cannot be declared, `b` is returned as it is."""
    (sa, total), (sb, _) = _strides(a), _strides(b)
    out = []
    for j, e in enumerate(b):
        lo, hi = sb[j], times(sb[j], e)
        cuts = sorted({s for s in sa if s not in (lo, hi) and divides(lo, s) and divides(s, hi) and quotient(s, lo)[1]},
                      key=_ascending)
        if not cuts:
            out.append(e)
            continue
        edges = [lo] + cuts + [hi]
        pieces = [dimension(quotient(edges[k + 1], edges[k])) for k in range(len(edges) - 1)]
        if any(p is None for p in pieces):
            return tuple(b)
        out += reversed(pieces)
    return tuple(out)


def _pieces(a, b):
    """How an index into shape `a` follows from one into shape `b` (the same elements in
    row-major order) one dimension of b at a time, where that is possible: where the boundaries of
    both shapes' dimensions (the products of their trailing extents) each divide the next, the
    pieces between consecutive boundaries each lie in one dimension of a and one of b. Returns,
    per dimension of a and per dimension of b, the pieces [(divisor, extent, multiplier)]: a's
    index is the sum over b's dimensions of ((b's index // divisor) % extent) * multiplier, each a
    monomial (_dims), where the shapes have sizes.
    None where the boundaries do not divide (4 x 6 against 6 x 4)."""
    (sa, total), (sb, _) = _strides(a), _strides(b)
    bounds = sorted(set(sa + sb + [total]), key=_ascending)
    if any(not divides(lo, hi) for lo, hi in zip(bounds, bounds[1:])):
        return None
    pieces = [[[] for _ in b] for _ in a]
    for lo, hi in zip(bounds, bounds[1:]):
        i = min(k for k, s in enumerate(sa) if divides(s, lo))  # the dimension of a holding [lo, hi)
        j = min(k for k, s in enumerate(sb) if divides(s, lo))
        pieces[i][j].append((quotient(lo, sb[j]), quotient(hi, lo), quotient(lo, sa[i])))
    return pieces


def reshape_to(cx, node, x, shape):
    """out = x in `shape`, the same elements in row-major order; a dimension of `shape` that is a
    product of sizes, or whose index x would read divided by a size, is declared as its parts, in
    the order x has them (out.product_shape; _split_at_sizes).
    Where each dimension of x
    becomes one or several of the output's (a split, extents of 1 inserted or removed), a copy
    that reads x at affine subscripts. Where several of x's trailing dimensions become the
    output's last (a flatten) and only Gemms read it, a view that each Gemm reads through x's
    own dimensions (`Value.view`). Otherwise each dimension of x that several of the output's
    make is read through gathers: where the two shapes' dimensions cut the elements at points
    that divide one another (`_pieces`), a sum of one-dimensional tables, one per output
    dimension (an affine term where the index is the output's own); else a known table of its
    index at each point of those dimensions."""
    order = [s for d in x.shape for s in monomial(d)[1]]
    declared = tuple(f for d in _split_at_sizes(x.shape, shape) for f in factors(d, order))
    product_shape = tuple(shape) if declared != tuple(shape) else None
    shape = declared
    kept_in = [d for d in range(x.rank) if x.shape[d] != 1]
    kept_out = [d for d in range(len(shape)) if shape[d] != 1]
    groups = _groups([x.shape[d] for d in kept_in], [shape[d] for d in kept_out])
    if groups is None:
        cx.unsupported(node, f"a reshape of a computed tensor from {list(x.shape)} to {list(shape)} that does not "
                             "keep its sizes in place")
    flatten = all(len(gj) == 1 for _, gj in groups) and all(len(gi) == 1 for gi, _ in groups[:-1])
    if (groups and flatten and len(groups[-1][0]) > 1 and product_shape is None
            and cx.read_only_as(node.output[0], "Gemm", 0)):
        out = Value(node.output[0], x.dtype, shape)
        out.view = (x, [kept_in[d] for d in groups[-1][0]])
        cx.values[node.output[0]] = out
        return [out]
    out = cx.output(node, 0, x.dtype, shape, product_shape)
    subs = indices(len(shape))
    x_subs = ["0"] * x.rank
    for gi, gj in groups:
        out_dims = [kept_out[k] for k in gj]
        if len(gi) == 1:
            terms, stride = [], (1, ())
            for d in reversed(out_dims):
                if stride[1]:
                    cx.unsupported(node, f"a reshape from {list(x.shape)} to {list(shape)} whose index would be "
                                         "multiplied by a size")
                terms.append((stride[0], subs[d]))
                stride = times(stride, shape[d])
            x_subs[kept_in[gi[0]]] = affine(list(reversed(terms)))
            continue
        extents = [shape[d] for d in out_dims]
        x_extents = [x.shape[kept_in[k]] for k in gi]
        pieces = _pieces(x_extents, extents)
        if pieces is not None:
            for k, by_out in zip(gi, pieces):
                terms = []
                for d, extent, parts in zip(out_dims, extents, by_out):
                    (div, ext, mult) = parts[0] if len(parts) == 1 else (None, None, None)
                    if div == (1, ()) and ext == monomial(extent) and not mult[1]:
                        terms.append((mult[0], subs[d]))
                    elif parts:
                        terms.append((1, read(cx, _index_column(cx, node, extent, parts), [subs[d]])))
                x_subs[kept_in[k]] = affine(terms)
            continue
        if any(not isinstance(e, int) for e in extents + x_extents):
            cx.unsupported(node, f"a reshape from {list(x.shape)} to {list(shape)} that regroups dimensions "
                                 "with sizes other than by whole multiples")
        flat = np.arange(int(np.prod(extents)), dtype=np.int64).reshape(extents)
        stride = int(np.prod(x_extents))
        for k, extent in zip(gi, x_extents):
            stride //= extent
            table = cx.index_table(((flat // stride) % extent).astype(np.int32))
            x_subs[kept_in[k]] = read(cx, table, [subs[d] for d in out_dims])
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")
    return [out]


def _index_column(cx, node, extent, parts):
    """The i32 tensor of `extent` whose element r is the sum over `parts` (monomials (divisor,
    extent, multiplier), _pieces) of ((r // divisor) % extent) * multiplier: a known table, shared
    with every other of the same values, where `extent` is a number; where it is a multiple of a
    size, a table the program computes at each run (a param cannot have a size), with `/` for
    `//` and r - r / e * e for `%`. There a piece's divisor and multiplier must be numbers, and
    its extent too unless it is the last of the index (r // divisor < extent already)."""
    if isinstance(extent, int):
        if any(m[1] for part in parts for m in part):
            cx.unsupported(node, f"a reshape whose index into a dimension of {extent} would be multiplied by a size")
        at = np.arange(extent, dtype=np.int64)
        column = sum(((at // div[0]) % ext[0]) * mult[0] for div, ext, mult in parts)
        return cx.index_table(column.astype(np.int32))
    key = (extent, tuple(parts))
    if key not in cx.computed_tables:
        terms = []
        for div, ext, mult in parts:
            whole = ext == quotient(monomial(extent), div) if divides(div, monomial(extent)) else False
            if div[1] or mult[1] or (ext[1] and not whole):
                cx.unsupported(node, f"a reshape whose index into a dimension of {extent} would need a size inside "
                                     "a division or a product")
            term = "i0" if div[0] == 1 else f"i0 / {div[0]}"
            if not whole:
                term = f"({term} - i0 / {div[0] * ext[0]} * {ext[0]})"
            terms.append(term if mult[0] == 1 else f"{term} * {mult[0]}")
        table = cx.graph.temporary("i32", (extent,), "index_column")
        cx.emit(f"{table.kname}[i0] = {' + '.join(terms)}")
        cx.computed_tables[key] = table
    return cx.computed_tables[key]


def reshaped(cx, node, x, target_shape, allowzero=0):
    """ONNX Reshape's output shape: 0 copies the input's dimension (unless allowzero), -1 is
    what the other dimensions leave."""
    shape = []
    for d, t in enumerate(target_shape):
        shape.append(x.onnx_shape[d] if t == 0 and not allowzero else t)
    if -1 in shape:
        total, rest = count(x.shape), count([s for s in shape if s != -1])
        missing = expression(quotient(total, rest)) if divides(rest, total) else None
        if missing is None:
            cx.unsupported(node, f"a -1 in {list(target_shape)} against a shape with sizes {list(x.shape)}")
        shape[shape.index(-1)] = missing
    return tuple(shape)


@op("Reshape")
def reshape(cx, node, ins, attrs):
    target_shape = [x if isinstance(x, str) else int(x) for x in cx.known(node, ins[1], "shape", symbolic=True)]
    return reshape_to(cx, node, ins[0], reshaped(cx, node, ins[0], target_shape, attrs.get("allowzero", 0)))


@op("Flatten")
def flatten(cx, node, ins, attrs):
    x = ins[0]
    axis = attrs.get("axis", 1)
    axis += x.rank if axis < 0 else 0
    lead, rest = dimension(count(x.shape[:axis])), dimension(count(x.shape[axis:]))
    if lead is None or not isinstance(rest, int):
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
    out = cx.output(node, 0, ins[0].dtype, tuple(shape))
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
        starts, ends = cx.known(node, ins[1], "starts"), cx.known(node, ins[2], "ends", symbolic=True)
        axes = cx.known(node, ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = cx.known(node, ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [int(a) + (x.rank if a < 0 else 0) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    begin, step, shape = [0] * x.rank, [1] * x.rank, list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        if not isinstance(x.shape[a], int):
            cx.unsupported(node, "slicing a dimension that is a size")
        if isinstance(e, str):
            # The first `size` elements (a causal mask's [:T, :T]): past the dimension's end they
            # read 0, where ONNX would stop at its end.
            if int(s) != 0 or st != 1:
                cx.unsupported(node, "a slice to a size that does not start at 0 in steps of 1")
            shape[a] = e
            continue
        first, last, count = _slice_range(x.shape[a], int(s), int(e), st)
        begin[a], step[a], shape[a] = first, st, count
    return [slice_into(cx, x, cx.output(node, 0, x.dtype, tuple(shape)), begin, step)]


def slice_into(cx, x, out, begin, step):
    """out = x from `begin` in steps of `step` along each dimension, as many as out's extents."""
    subs = indices(x.rank)
    # A dimension read from 0 in steps of 1 but not to its end would stand alone in two extents,
    # which the language refuses: it is read through a sum over one point, as Concat's parts.
    short = [d for d in range(x.rank) if begin[d] == 0 and step[d] == 1 and isinstance(out.shape[d], int)
             and out.shape[d] != x.shape[d]]
    x_subs = [affine([(step[d], subs[d])] + ([(-1, "q0")] if d in short else []), begin[d]) for d in range(x.rank)]
    text = f"sum({read(cx, x, x_subs)}) where q0 < 1" if short else read(cx, x, x_subs)
    cx.emit(f"{target(cx, out, subs)} = {text}")
    return out


@op("Split")
def split(cx, node, ins, attrs):
    x = ins[0]
    axis = attrs.get("axis", 0)
    axis += x.rank if axis < 0 else 0
    if not isinstance(x.shape[axis], int):
        cx.unsupported(node, "splitting a dimension that is a size")
    if cx.opset >= 13 and len(ins) > 1 and ins[1] is not None:
        parts = [int(p) for p in cx.known(node, ins[1], "split")]
    elif "split" in attrs:
        parts = [int(p) for p in attrs["split"]]
    else:  # equal parts, the last one smaller where they do not divide (opset 18's num_outputs)
        n = attrs.get("num_outputs", len(node.output))
        each = -(-x.shape[axis] // n)
        parts = [min(each, x.shape[axis] - each * i) for i in range(n)]
    if sum(parts) != x.shape[axis] or len(parts) != len(node.output):
        cx.unsupported(node, f"parts {parts} of a dimension of {x.shape[axis]}")
    outs, offset = [], 0
    for i, part in enumerate(parts):
        shape = list(x.shape)
        shape[axis] = part
        begin = [0] * x.rank
        begin[axis] = offset
        outs.append(slice_into(cx, x, cx.output(node, i, x.dtype, tuple(shape)), begin, [1] * x.rank))
        offset += part
    return outs


def _slice_range(size, start, end, step):
    first, stop, stride = slice(start, end, step).indices(size)
    count = max(0, -(-(stop - first) // stride))
    return first, stop, count


@op("Pad")
def pad(cx, node, ins, attrs):
    """`constant` mode: the input shifted by the begin pads, the padding a compound subscript
    outside its dimension reads (0), or under a select of the index ranges where the value is
    another; `edge`, `reflect` and `wrap`: each padded dimension read through a known table of the
    input position each output position copies."""
    x = ins[0]
    mode = attrs.get("mode", "constant")
    pads = attrs.get("pads") if cx.opset < 11 else cx.known(node, ins[1], "pads")
    value = attrs.get("value", 0.0) if cx.opset < 11 else (
        cx.known(node, ins[2], "constant_value").item() if len(ins) > 2 and ins[2] is not None else 0)
    pads = [int(p) for p in pads]
    if len(ins) > 3 and ins[3] is not None:  # opset 18: the pads are those of these axes
        axes = [int(a) + (x.rank if a < 0 else 0) for a in cx.known(node, ins[3], "axes")]
        if len(pads) != 2 * len(axes) or sorted(set(axes)) != sorted(axes) or any(not 0 <= a < x.rank for a in axes):
            cx.unsupported(node, f"pads {pads} for axes {axes} of a rank-{x.rank} input")
        full = [0] * (2 * x.rank)
        for k, a in enumerate(axes):
            full[a], full[a + x.rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * x.rank:
        cx.unsupported(node, f"{len(pads)} pads for a rank-{x.rank} input")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        cx.unsupported(node, f"mode '{mode}'")
    if any(p < 0 for p in pads):
        cx.unsupported(node, "negative pads")
    padded = [d for d in range(x.rank) if pads[d] or pads[d + x.rank]]
    if any(not isinstance(x.shape[d], int) for d in padded):
        cx.unsupported(node, "padding a dimension that is a size")
    if mode == "reflect" and any(pads[d] >= x.shape[d] or pads[d + x.rank] >= x.shape[d] for d in padded):
        cx.unsupported(node, f"reflect pads {pads} as wide as the input {list(x.shape)} or wider")
    if mode != "constant" and any(x.shape[d] == 0 for d in padded):
        cx.unsupported(node, f"'{mode}' padding of an empty dimension")
    shape = tuple(x.shape[d] + pads[d] + pads[d + x.rank] for d in range(x.rank))
    out = cx.output(node, 0, x.dtype, shape)
    subs = indices(x.rank)
    if mode == "constant":
        # A compound subscript outside its dimension reads 0: the padding itself. A dimension
        # padded at its end only would be read at its bare index, standing alone in two extents,
        # which the language refuses: it is read through a sum over one point, as slice_into does.
        short = [d for d in padded if not pads[d]]
        text = read(cx, x, [affine([(1, subs[d])] + ([(-1, "q0")] if d in short else []), -pads[d])
                            for d in range(x.rank)])
        text = f"sum({text})" if short else text
        if value != 0 and padded:
            inside = " & ".join(f"({subs[d]} >= {pads[d]}) & ({subs[d]} < {pads[d] + x.shape[d]})" for d in padded)
            text = f"select({inside}, {text}, {literal(value, x.dtype)})"
        cx.emit(f"{target(cx, out, subs)} = {text}" + (" where q0 < 1" if short else ""))
        return [out]
    x_subs = list(subs)
    for d in padded:
        n = x.shape[d]
        at = np.arange(shape[d]) - pads[d]
        if mode == "edge":
            source = np.clip(at, 0, n - 1)
        elif mode == "wrap":
            source = np.mod(at, n)
        else:  # reflect: about the first and the last element, which are not repeated
            source = np.abs(at)
            source = np.where(source > n - 1, 2 * (n - 1) - source, source)
        x_subs[d] = _table(cx, source, subs[d])
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")
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
    position = _position(read(cx, idx, i_subs), data.shape[axis], idx.dtype)
    d_subs = subs[:axis] + [position] + subs[axis + idx.rank:]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, data, d_subs)}")
    return [out]


@op("GatherElements")
def gather_elements(cx, node, ins, attrs):
    """out[I] = data[I with its `axis` subscript replaced by indices[I]]: out has the indices'
    shape; negative positions count from the end."""
    data, idx = ins[:2]
    axis = attrs.get("axis", 0) + (data.rank if attrs.get("axis", 0) < 0 else 0)
    if idx.dtype not in ("i32", "i64"):
        cx.unsupported(node, f"{idx.dtype} indices")
    if idx.rank != data.rank:
        cx.unsupported(node, f"indices of rank {idx.rank} for data of rank {data.rank}")
    out = cx.output(node, 0, data.dtype, idx.shape)
    subs = indices(idx.rank)
    position = _position(read(cx, idx, subs), data.shape[axis], idx.dtype)
    cx.emit(f"{target(cx, out, subs)} = {read(cx, data, subs[:axis] + [position] + subs[axis + 1:])}")
    return [out]


@op("Tile")
def tile(cx, node, ins, attrs):
    """x repeated a known number of times along each dimension: out[i] reads x at i modulo the
    dimension's extent, through a known table where it repeats (the subscripts cannot divide)."""
    x = ins[0]
    repeats = [int(r) for r in np.asarray(cx.known(node, ins[1], "repeats")).reshape(-1)]
    if len(repeats) != x.rank or any(r < 0 for r in repeats):
        cx.unsupported(node, f"repeats {repeats} for a tensor of rank {x.rank}")
    if any(r != 1 and not isinstance(d, int) for r, d in zip(repeats, x.shape)):
        cx.unsupported(node, f"repeating a dimension that is a size ({list(x.shape)} by {repeats})")
    shape = tuple(d * r if r != 1 else d for d, r in zip(x.shape, repeats))
    out = cx.output(node, 0, x.dtype, shape)
    subs = indices(x.rank)
    x_subs = [s if r == 1 else _table(cx, np.arange(d * r) % d, s) for s, d, r in zip(subs, x.shape, repeats)]
    cx.emit(f"{target(cx, out, subs)} = {read(cx, x, x_subs)}")
    return [out]


def _resize_source(mode, x, n, m, scale):
    """Where output position x (an array) reads along a dimension of n resized to m."""
    if mode == "align_corners":
        return x * (n - 1) / (m - 1) if m > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "pytorch_half_pixel" and m == 1:
        return np.zeros_like(x)
    return (x + 0.5) / scale - 0.5  # half_pixel, pytorch_half_pixel


@op("Resize", "Upsample")
def resize(cx, node, ins, attrs):
    """`nearest` or `linear` resizing to known scales or sizes: per dimension a known table of the
    positions each output point reads (nearest), or of the two it blends and the weight of the
    second (linear: the corners of every resized dimension summed with their weights), the
    positions clamped to the input as ONNX's edge padding reads them. Upsample (opsets 7 to 9)
    is Resize's asymmetric transformation, rounding down."""
    x = ins[0]
    upsample = node.op_type == "Upsample"
    mode = attrs.get("mode", "nearest")
    transform = "asymmetric" if upsample else attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest_mode = "floor" if upsample else attrs.get("nearest_mode", "round_prefer_floor")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        cx.unsupported(node, "keep_aspect_ratio_policy other than stretch")
    if mode not in ("nearest", "linear") or transform not in ("half_pixel", "pytorch_half_pixel", "align_corners",
                                                               "asymmetric"):
        cx.unsupported(node, f"mode {mode!r} with coordinate_transformation_mode {transform!r} (kiln resizes "
                             "nearest or linear, half_pixel, pytorch_half_pixel, align_corners or asymmetric)")
    if attrs.get("antialias", 0) or attrs.get("exclude_outside", 0) or "axes" in attrs:
        cx.unsupported(node, "antialias, exclude_outside or axes")
    if not all(isinstance(d, int) for d in x.shape):
        cx.unsupported(node, f"an input of shape {list(x.shape)} with sizes")
    given = [(i, ins[i]) for i in ((1,) if cx.opset < 11 or upsample else (2, 3)) if len(ins) > i and ins[i] is not None]
    known = [(i, np.asarray(cx.known(node, v, "scales" if i < 3 else "sizes"))) for i, v in given]
    if upsample and "scales" in attrs:  # opset 7
        known = [(1, np.asarray(attrs["scales"], np.float32))]
    known = [(i, a) for i, a in known if a.size]
    if len(known) != 1 or known[0][1].size != x.rank:
        cx.unsupported(node, "neither known scales nor known sizes of every dimension")
    which, values = known[0]
    if which == 3:
        shape = [int(v) for v in values]
        scales = [m / n for m, n in zip(shape, x.shape)]
    else:
        scales = [float(v) for v in values]
        shape = [int(np.floor(n * s)) for n, s in zip(x.shape, scales)]
    out = cx.output(node, 0, x.dtype, tuple(shape))
    subs = indices(x.rank)
    resized = [d for d in range(x.rank) if shape[d] != x.shape[d] or scales[d] != 1]
    reads = {}  # per resized dimension: [(position subscript, weight read or None)]
    for d in resized:
        n, m = x.shape[d], shape[d]
        source = _resize_source(transform, np.arange(m, dtype=np.float64), n, m, scales[d])
        if mode == "nearest":
            picks = {"round_prefer_floor": np.ceil(source - 0.5), "round_prefer_ceil": np.floor(source + 0.5),
                     "floor": np.floor(source), "ceil": np.ceil(source)}
            if nearest_mode not in picks:
                cx.unsupported(node, f"nearest_mode {nearest_mode!r}")
            reads[d] = [(_table(cx, np.clip(picks[nearest_mode], 0, n - 1), subs[d]), None)]
        else:
            low = np.floor(source)
            weight = (source - low).astype(np.float32)
            w = read(cx, cx.constant(weight, "resize_weight"), [subs[d]])
            reads[d] = [(_table(cx, np.clip(low, 0, n - 1), subs[d]), f"(1 - {w})"),
                        (_table(cx, np.clip(low + 1, 0, n - 1), subs[d]), w)]
    terms = []
    for corner in itertools.product(*(reads[d] for d in resized)):
        x_subs = list(subs)
        weights = []
        for d, (position, weight) in zip(resized, corner):
            x_subs[d] = position
            if weight is not None:
                weights.append(weight)
        terms.append(" * ".join(weights + [read(cx, x, x_subs)]))
    cx.emit(f"{target(cx, out, subs)} = {' + '.join(terms)}")
    return [out]


@op("DepthToSpace", "SpaceToDepth")
def depth_space(cx, node, ins, attrs):
    """Blocks of bs x bs points moved between the channels and the image (NCHW, known extents),
    through known tables of the quotients and remainders the language's subscripts cannot take:
    DepthToSpace's y[n, c, h, w] reads x[n, (h % bs * bs + w % bs) * C + c, h / bs, w / bs] (DCR)
    or x[n, c * bs * bs + h % bs * bs + w % bs, ...] (CRD); SpaceToDepth is the inverse of DCR."""
    x, bs = ins[0], attrs["blocksize"]
    if x.rank != 4 or not all(isinstance(d, int) for d in x.shape[1:]):
        cx.unsupported(node, f"an input of shape {list(x.shape)} (NCHW with known channels and extents)")
    n, c, h, w = x.shape
    subs = indices(4)
    if node.op_type == "DepthToSpace":
        if c % (bs * bs):
            cx.unsupported(node, f"{c} channels, not a multiple of blocksize² = {bs * bs}")
        oc = c // (bs * bs)
        out = cx.output(node, 0, x.dtype, (n, oc, h * bs, w * bs))
        rows, cols = np.arange(h * bs), np.arange(w * bs)
        qh, rh = _table(cx, rows // bs, subs[2]), _table(cx, rows % bs, subs[2])
        qw, rw = _table(cx, cols // bs, subs[3]), _table(cx, cols % bs, subs[3])
        if attrs.get("mode", "DCR") == "CRD":
            channel = f"{bs * bs}*{subs[1]} + {bs}*{rh} + {rw}"
        else:
            channel = f"{oc * bs}*{rh} + {oc}*{rw} + {subs[1]}"
        cx.emit(f"{target(cx, out, subs)} = {read(cx, x, [subs[0], channel, qh, qw])}")
        return [out]
    if h % bs or w % bs:
        cx.unsupported(node, f"an image of {h} x {w}, not a multiple of blocksize {bs}")
    out = cx.output(node, 0, x.dtype, (n, c * bs * bs, h // bs, w // bs))
    channels = np.arange(c * bs * bs)
    within, bh, bw = (_table(cx, t, subs[1]) for t in (channels % c, channels // c // bs, channels // c % bs))
    cx.emit(f"{target(cx, out, subs)} = "
            f"{read(cx, x, [subs[0], within, f'{bs}*{subs[2]} + {bh}', f'{bs}*{subs[3]} + {bw}'])}")
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
