"""Operators that multiply tensors: MatMul, Einsum and Gemm (docs/onnx.md)."""

from ._emit import broadcast_read, broadcast_shape, indices, literal, op, read, target
from ._graph import FLOAT_TYPES

# --- products --------------------------------------------------------------------------------

@op("MatMul")
def matmul(cx, node, ins, attrs):
    a, b = ins[:2]
    if a.rank == 0 or b.rank == 0:
        cx.unsupported(node, "a scalar operand")
    if a.product_shape is not None:
        # Rows that are a product of sizes (a batch of sequences flattened), by a matrix: as Gemm.
        if len(a.product_shape) != 2 or b.rank != 2:
            cx.unsupported(node, f"a product of {list(a.product_shape)}, whose rows are a product of sizes, by "
                                 f"{list(b.shape)}: kiln takes such rows only by a matrix")
        rows = a.shape[:-1]
        out = cx.output(node, 0, a.dtype, (*rows, b.shape[1]), (a.product_shape[0], b.shape[1]))
        subs = indices(len(rows) + 1)
        cx.emit(f"{target(cx, out, subs)} = sum({read(cx, a, subs[:-1] + ['r0'])} * {_right(cx, b, ['r0', subs[-1]])})")
        return [out]
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
    cx.emit(f"{target(cx, out, out_subs)} = sum({read(cx, a, a_subs)} * {_right(cx, b, b_subs)})")
    return [out]


@op("Einsum")
def einsum(cx, node, ins, attrs):
    """A statement as the equation writes it: out[output letters] = sum(product of the operands
    read at their letters) over the letters the output lacks; '...' stands for dimensions
    broadcast from the right, a letter repeated in one operand reads its diagonal, and without
    '->' the output is '...' and the letters that appear once, in alphabetical order."""
    equation = attrs["equation"].replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ins) or any(v is None for v in ins):
        cx.unsupported(node, f"equation {equation!r} for {len(ins)} operands")
    if any(v.dtype != ins[0].dtype for v in ins):
        cx.unsupported(node, "operands of different types")
    letters = [t.replace("...", "") for t in terms]
    if any(not (t.isalpha() and t.isascii()) and t for t in letters + [rhs.replace("...", "")]):
        cx.unsupported(node, f"equation {equation!r}")
    ellipsis = [v.rank - len(t) if "..." in term else 0 for term, t, v in zip(terms, letters, ins)]
    if any(e < 0 or ("..." not in term and v.rank != len(t)) for e, term, t, v in zip(ellipsis, terms, letters, ins)):
        cx.unsupported(node, f"equation {equation!r} for operands of ranks {[v.rank for v in ins]}")
    if not arrow:
        once = sorted(c for c in set("".join(letters)) if "".join(letters).count(c) == 1)
        rhs = ("..." if any("..." in t for t in terms) else "") + "".join(once)
    out_letters = rhs.replace("...", "")
    if any(c not in "".join(letters) for c in out_letters) or len(set(out_letters)) != len(out_letters) or \
            rhs.count("...") > 1 or ("..." in rhs) != any("..." in t for t in terms):
        cx.unsupported(node, f"equation {equation!r}: each output letter once, and from an operand; '...' in the "
                             "output where an operand has it")
    wide = max(ellipsis, default=0)
    extent = {}
    for term, t, v, e in zip(terms, letters, ins, ellipsis):
        dims = list(v.shape)
        at = term.find("...")
        own = dims[:at] + dims[at + e:] if at >= 0 else dims
        for c, d in zip(t, own):
            if extent.setdefault(c, d) != d:
                cx.unsupported(node, f"letter {c!r} of extents {extent[c]} and {d}")
    broad = [1] * wide
    for term, v, e in zip(terms, ins, ellipsis):
        at = term.find("...")
        for k in range(e):
            d = v.shape[at + k]
            if d != 1:
                broad[wide - e + k] = d
    shape = []
    names = {}
    for part in rhs.partition("...") if "..." in rhs else ("", "", rhs):
        if part == "...":
            names.update({f"...{k}": f"i{len(shape) + k}" for k in range(wide)})
            shape += broad
        else:
            for c in part:
                names[c] = f"i{len(shape)}"
                shape.append(extent[c])
    for n, c in enumerate(c for c in dict.fromkeys("".join(letters)) if c not in out_letters):
        names[c] = f"r{n}"
    reads = []
    for term, v, e in zip(terms, ins, ellipsis):
        at = term.find("...")
        subs = []
        for c in term.replace("...", "."):
            if c != ".":
                subs.append(names[c])
                continue
            for j in range(e):
                subs.append("0" if v.shape[at + j] == 1 and broad[wide - e + j] != 1 else names[f"...{wide - e + j}"])
        reads.append(read(cx, v, subs))
    out = cx.output(node, 0, ins[0].dtype, tuple(shape))
    text = " * ".join(reads)
    if any(c not in out_letters for c in "".join(letters)):
        text = f"sum({text})"
    cx.emit(f"{target(cx, out, [f'i{d}' for d in range(len(shape))])} = {text}")
    return [out]


def _right(cx, b, subs):
    """MatMul's right operand read at `subs` (its own order): through the tensor that stores it
    with the last two dimensions swapped where a Transpose left it so (Value.transposed)."""
    if b.transposed is None:
        return read(cx, b, subs)
    return read(cx, b.transposed, subs[:-2] + [subs[-1], subs[-2]])


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
    reduced = [f"r{k}" for k in range(len(merged))]
    # The rows: x's first dimension; the dimensions between it and the merged ones have extent 1.
    x_subs = ["i0" if d == 0 else "0" for d in range(x.rank)]
    for d, r in zip(merged, reduced):
        x_subs[d] = r
    # The weights as they are stored, reshaped (a view, not a copy: VGG-19's first classifier
    # holds 411 MB), and read transposed where Gemm takes them transposed.
    if trans_b:
        w = cx.constant(b.const.reshape(b.const.shape[0], *split), "flat_weights")
        return read(cx, x, x_subs), read(cx, w, ["i1", *reduced])
    w = cx.constant(b.const.reshape(*split, b.const.shape[-1]), "flat_weights")
    return read(cx, x, x_subs), read(cx, w, [*reduced, "i1"])


@op("Gemm")
def gemm(cx, node, ins, attrs):
    a, b = ins[:2]
    c = ins[2] if len(ins) > 2 else None
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    trans_a, trans_b = attrs.get("transA", 0), attrs.get("transB", 0)
    if a.dtype not in FLOAT_TYPES and (alpha != int(alpha) or beta != int(beta)):
        cx.unsupported(node, f"alpha {alpha} and beta {beta} that are not whole, on {a.dtype} operands")
    n = b.shape[0] if trans_b else b.shape[1]
    if a.product_shape is not None:
        # Rows that are a product of sizes (a batch of sequences flattened): a's declared
        # dimensions but the last index the rows, and the result is declared likewise.
        if trans_a or (c is not None and beta != 0 and c.rank == 2 and c.shape[0] != 1):
            cx.unsupported(node, f"a product over rows {list(a.product_shape)} that are a product of sizes, with "
                                 "transA or a bias of one row per row")
        rows = a.shape[:-1]
        out = cx.output(node, 0, a.dtype, (*rows, n), (a.product_shape[0], n))
        subs = indices(len(rows) + 1)
        a_read = read(cx, a, subs[:-1] + ["r0"])
        b_read = read(cx, b, [subs[-1], "r0"] if trans_b else ["r0", subs[-1]])
    else:
        m = a.shape[1] if trans_a else a.shape[0]
        out = cx.output(node, 0, a.dtype, (m, n))
        subs = ["i0", "i1"]
        if a.view is not None and not trans_a:
            a_read, b_read = flattened_product_reads(cx, node, a, b, trans_b)
        else:
            a_read = read(cx, a, ["r0", "i0"] if trans_a else ["i0", "r0"])
            b_read = read(cx, b, ["i1", "r0"] if trans_b else ["r0", "i1"])
    text = f"sum({a_read} * {b_read})"
    if alpha != 1:
        text = f"{literal(alpha, a.dtype)} * {text}"
    if c is not None and beta != 0:
        bias = broadcast_read(cx, c, out.shape, subs)
        text += f" + {bias}" if beta == 1 else f" + {literal(beta, a.dtype)} * {bias}"
    cx.emit(f"{target(cx, out, subs)} = {text}")
    return [out]
