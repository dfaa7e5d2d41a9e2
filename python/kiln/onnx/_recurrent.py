"""Recurrent layers: RNN, GRU and LSTM, unrolled over their known number of steps (docs/onnx.md)."""

import numpy as np

from ._emit import indices, literal, op, read, target
from ._graph import FLOAT_TYPES
from ._movement import place_side_by_side

# The gates each layer computes, in ONNX's order within W, R and B.
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# ONNX's default activations; others are refused.
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# Steps are unrolled into statements of their own; Y gathers them at most this many a statement.
_MAX_STEPS = 1024
_PARTS_PER_STATEMENT = 16


@op("RNN", "GRU", "LSTM")
def recurrent(cx, node, ins, attrs):
    """Per direction: W, R and the biases split by gate ([gates, H, ...], a view of known weights,
    else one copy), the input's product with every gate's W for all steps at once (a gemm), then
    step by step (reverse: from the last) the hidden state's product with R (a gemm) and the
    layer's equations, as ONNX writes them with its default activations, which the compiler fuses
    into one kernel a step. With sequence_lens, a batch row past its length keeps its state and
    puts zeros into Y."""
    kind = node.op_type
    gates = _GATES[kind]

    def given(i):
        return ins[i] if len(ins) > i and ins[i] is not None else None
    x, w, r = ins[:3]
    bias, lengths, h0 = given(3), given(4), given(5)
    c0, peep = (given(6), given(7)) if kind == "LSTM" else (None, None)
    hidden = attrs.get("hidden_size")
    layout = attrs.get("layout", 0)
    direction = attrs.get("direction", "forward")
    if x.dtype not in FLOAT_TYPES or x.rank != 3 or hidden is None:
        cx.unsupported(node, f"an input of {x.dtype}{list(x.shape)}" + ("" if hidden else " without hidden_size"))
    if direction not in ("forward", "reverse", "bidirectional"):
        cx.unsupported(node, f"direction '{direction}'")
    directions = 2 if direction == "bidirectional" else 1
    if "activations" in attrs and [a.decode() if isinstance(a, bytes) else a for a in attrs["activations"]] != \
            _DEFAULT_ACTIVATIONS[kind] * directions:
        cx.unsupported(node, f"activations {attrs['activations']} (kiln takes ONNX's defaults)")
    if "clip" in attrs or attrs.get("input_forget", 0):
        cx.unsupported(node, "clip or input_forget")
    steps, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    if not isinstance(steps, int) or not 1 <= steps <= _MAX_STEPS:
        cx.unsupported(node, f"{steps} steps (kiln unrolls a known number of steps, at most {_MAX_STEPS})")
    if list(w.shape) != [directions, gates * hidden, x.shape[2]] or \
            list(r.shape) != [directions, gates * hidden, hidden]:
        cx.unsupported(node, f"W of {list(w.shape)} and R of {list(r.shape)} for {directions} direction(s), "
                             f"{gates} gates of {hidden} and inputs of {x.shape[2]}")
    dt = x.dtype
    zero, one = literal(0, dt), literal(1, dt)
    linear_before_reset = attrs.get("linear_before_reset", 0)
    # Y's part of a step: [1, 1, B, H] (layout 0) or [B, 1, 1, H], a copy of the hidden state,
    # which stays [B, H] so that the next step's product with R is a gemm call.
    part_shape = (batch, 1, 1, hidden) if layout else (1, 1, batch, hidden)
    ys, last_h, last_c = [], [], []
    for d in range(directions):
        reverse = direction == "reverse" or d == 1
        w3 = _by_gate(cx, w, d, 0, gates, hidden, "gate_weights")
        r3 = _by_gate(cx, r, d, 0, gates, hidden, "gate_recurrences")
        wb = _by_gate(cx, bias, d, 0, gates, hidden, "gate_bias") if bias is not None else None
        rb = _by_gate(cx, bias, d, gates * hidden, gates, hidden, "gate_bias") if bias is not None else None
        pp = _by_gate(cx, peep, d, 0, 3, hidden, "peepholes") if peep is not None else None
        # x · Wᵀ + Wb (+ Rb but for GRU's candidate) for every step: xw[t, b, gate, j].
        xw = cx.graph.temporary(dt, (steps, batch, gates, hidden), "input_product")
        x_subs = ["i1", "i0", "r0"] if layout else ["i0", "i1", "r0"]
        text = f"sum({read(cx, x, x_subs)} * {read(cx, w3, ['i2', 'i3', 'r0'])})"
        if wb is not None:
            text += f" + {read(cx, wb, ['i2', 'i3'])}"
            if kind == "GRU":  # the candidate's Rb goes inside its reset product
                text += f" + select(i2 < 2, {read(cx, rb, ['i2', 'i3'])}, {zero})"
            else:
                text += f" + {read(cx, rb, ['i2', 'i3'])}"
        cx.emit(f"{target(cx, xw, indices(4))} = {text}")

        def initial(value, hint):
            state = cx.graph.temporary(dt, (batch, hidden), hint)
            cx.emit(f"{target(cx, state, ['i0', 'i1'])} = " +
                    (read(cx, value, [str(d), 'i0', 'i1']) if value is not None else zero))
            return state
        h = initial(h0, "initial_h")
        c = initial(c0, "initial_c") if kind == "LSTM" else None
        parts = []  # Y's part of each step, where Y is read
        here = ["i0", "i1"]
        for s in range(steps):
            t = steps - 1 - s if reverse else s
            # h · Rᵀ for every gate: rec[b, gate, j].
            rec = cx.graph.temporary(dt, (batch, gates, hidden), "recurrent_product")
            cx.emit(f"{target(cx, rec, ['i0', 'i1', 'i2'])} = "
                    f"sum({read(cx, h, ['i0', 'r0'])} * {read(cx, r3, ['i1', 'i2', 'r0'])})")

            def gate(k):
                return f"{read(cx, xw, [str(t), 'i0', str(k), 'i1'])} + {read(cx, rec, ['i0', str(k), 'i1'])}"
            h_prev = read(cx, h, here)
            new_h = cx.graph.temporary(dt, (batch, hidden), "h")
            if kind == "RNN":
                cx.emit(f"{target(cx, new_h, here)} = tanh({gate(0)})")
            elif kind == "GRU":
                z = cx.graph.temporary(dt, (batch, hidden), "update_gate")
                cx.emit(f"{target(cx, z, here)} = sigmoid({gate(0)})")
                reset = cx.graph.temporary(dt, (batch, hidden), "reset_gate")
                cx.emit(f"{target(cx, reset, here)} = sigmoid({gate(1)})")
                if linear_before_reset:  # r ⊙ (h · Rhᵀ + Rbh)
                    recurrent_part = f"{read(cx, reset, here)} * ({read(cx, rec, ['i0', '2', 'i1'])}" + \
                        (f" + {read(cx, rb, ['2', 'i1'])})" if rb is not None else ")")
                else:  # (r ⊙ h) · Rhᵀ + Rbh
                    recurrent_part = (f"sum({read(cx, reset, ['i0', 'r0'])} * "
                                      f"{read(cx, h, ['i0', 'r0'])} * "
                                      f"{read(cx, r3, ['2', 'i1', 'r0'])})")
                    if rb is not None:
                        recurrent_part += f" + {read(cx, rb, ['2', 'i1'])}"
                candidate = cx.graph.temporary(dt, (batch, hidden), "candidate")
                cx.emit(f"{target(cx, candidate, here)} = tanh({read(cx, xw, [str(t), 'i0', '2', 'i1'])} + "
                        f"{recurrent_part})")
                z_here = read(cx, z, here)
                cx.emit(f"{target(cx, new_h, here)} = ({one} - {z_here}) * {read(cx, candidate, here)} + "
                        f"{z_here} * {h_prev}")
            else:  # LSTM: gates i, o, f, c; peepholes P = [Pi, Po, Pf]
                def peephole(k, state):
                    return f" + {read(cx, pp, [str(k), 'i1'])} * {read(cx, state, here)}" if pp is not None else ""
                i_gate = cx.graph.temporary(dt, (batch, hidden), "input_gate")
                cx.emit(f"{target(cx, i_gate, here)} = sigmoid({gate(0)}{peephole(0, c)})")
                f_gate = cx.graph.temporary(dt, (batch, hidden), "forget_gate")
                cx.emit(f"{target(cx, f_gate, here)} = sigmoid({gate(2)}{peephole(2, c)})")
                new_c = cx.graph.temporary(dt, (batch, hidden), "c")
                cx.emit(f"{target(cx, new_c, here)} = {read(cx, f_gate, here)} * {read(cx, c, here)} + "
                        f"{read(cx, i_gate, here)} * tanh({gate(3)})")
                if lengths is not None:
                    new_c = _held(cx, new_c, c, lengths, t, "c")
                o_gate = cx.graph.temporary(dt, (batch, hidden), "output_gate")
                cx.emit(f"{target(cx, o_gate, here)} = sigmoid({gate(1)}{peephole(1, new_c)})")
                cx.emit(f"{target(cx, new_h, here)} = {read(cx, o_gate, here)} * "
                        f"tanh({read(cx, new_c, here)})")
                c = new_c
            if cx.used(node, 0):
                part = cx.graph.temporary(dt, part_shape, "step")
                b_sub = "i0" if layout else "i2"
                value = read(cx, new_h, [b_sub, 'i3'])
                if lengths is not None:
                    value = f"select({t} < {read(cx, lengths, [b_sub])}, {value}, {zero})"
                cx.emit(f"{target(cx, part, indices(4))} = {value}")
                parts.append((t, part))
            h = _held(cx, new_h, h, lengths, t, "h") if lengths is not None else new_h
        ys.append([p for _, p in sorted(parts, key=lambda tp: tp[0])])
        last_h.append(h)
        last_c.append(c)
    time_axis, direction_axis = (1, 2) if layout else (0, 1)
    if cx.used(node, 0):
        y_shape = (batch, steps, directions, hidden) if layout else (steps, directions, batch, hidden)
        per_direction = []
        for parts in ys:
            shape = list(y_shape)
            shape[direction_axis] = 1
            per_direction.append(_stacked(cx, node if directions == 1 else None, parts, time_axis, tuple(shape)))
        if directions > 1:
            place_side_by_side(cx, cx.output(node, 0, dt, y_shape), per_direction, direction_axis)
    for i, states in ((1, last_h), (2, last_c)):
        if cx.used(node, i):
            shape = (batch, directions, hidden) if layout else (directions, batch, hidden)
            out = cx.output(node, i, dt, shape)
            b_sub, d_sub = ("i0", "i1") if layout else ("i1", "i0")
            # Each direction's last state at its own position along the directions.
            terms = [f"select({d_sub} == {k}, {read(cx, state, [b_sub, 'i2'])}, {zero})"
                     for k, state in enumerate(states)]
            cx.emit(f"{target(cx, out, indices(3))} = {' + '.join(terms)}")


def _by_gate(cx, value, d, offset, gates, hidden, hint):
    """Direction d's rows [offset, offset + gates · hidden) of W, R, B or P ([D, rows, ...]) as
    [gates, hidden, ...]: a view of a known value, else a copy the program makes."""
    rest = value.shape[2:]
    if value.const is not None:
        part = value.const[d, offset:offset + gates * hidden]
        return cx.constant(np.ascontiguousarray(part.reshape(gates, hidden, *rest)), hint)
    out = cx.graph.temporary(value.dtype, (gates, hidden, *rest), hint)
    subs = indices(2 + len(rest))
    row = f"{hidden}*i0 + i1 + {offset}" if offset else f"{hidden}*i0 + i1"
    cx.emit(f"{target(cx, out, subs)} = {read(cx, value, [str(d), row, *subs[2:]])}")
    return out


def _held(cx, new, old, lengths, t, hint):
    """`new` where step t is inside the batch row's sequence, else `old` (sequence_lens)."""
    held = cx.graph.temporary(new.dtype, new.shape, hint)
    cx.emit(f"{target(cx, held, ['i0', 'i1'])} = select({t} < {read(cx, lengths, ['i0'])}, "
            f"{read(cx, new, ['i0', 'i1'])}, {read(cx, old, ['i0', 'i1'])})")
    return held


def _stacked(cx, node, parts, axis, shape):
    """The steps' parts one after another along `axis`, into node's output Y (node given) or a
    tensor of `shape`; at most _PARTS_PER_STATEMENT parts a statement (a tree of them beyond)."""
    while len(parts) > _PARTS_PER_STATEMENT:
        grouped = []
        for k in range(0, len(parts), _PARTS_PER_STATEMENT):
            group = parts[k:k + _PARTS_PER_STATEMENT]
            size = list(group[0].shape)
            size[axis] = sum(p.shape[axis] for p in group)
            merged = cx.graph.temporary(group[0].dtype, tuple(size), "steps")
            place_side_by_side(cx, merged, group, axis)
            grouped.append(merged)
        parts = grouped
    out = cx.output(node, 0, parts[0].dtype, shape) if node is not None else \
        cx.graph.temporary(parts[0].dtype, shape, "direction")
    place_side_by_side(cx, out, parts, axis)
    return out
