"""Memory planning for an imported program (docs/onnx.md, "Memory"): intermediates whose
lifetimes do not overlap share one declaration, and so one buffer.

Only tensors the compiler stores are planned. Lowering inlines an intermediate into its one
reader (src/loop/inlining.h) when one elementwise `=` statement writes it, exactly one later
statement reads it, no call runs in between and nothing its statement reads is written in
between; such a tensor never has a buffer, and giving it a shared declaration (written more than
once) would make lowering store it. A call reads only stored tensors. Its statement's reads
happen where it is inlined, so they count at its reader's place when lifetimes are measured."""

import re

_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9_.])[A-Za-z_][A-Za-z0-9_]*")  # not inside a number (1e5)


class _Statement:
    """The declared tensors one statement writes and reads."""

    def __init__(self, text, declared):
        self.is_call = text.startswith("call ")
        if self.is_call:
            args, _, outs = text.partition("->")
            written = [n.strip() for n in outs.split(",")]
            read = [m.group(0) for m in _IDENTIFIER.finditer(args, args.index("(")) if not _is_attribute(args, m)]
            self.elementwise = False
        else:
            lhs, _, rhs = text.partition(" = ")
            written = [_IDENTIFIER.match(lhs).group(0)]
            read = [m.group(0) for m in _IDENTIFIER.finditer(rhs)]
            self.elementwise = bool(rhs) and not _is_reduction(rhs.split(" where ")[0].strip())
        self.written = [n for n in written if n in declared]
        self.read = sorted({n for n in read if n in declared})


_REDUCTIONS = ("sum", "prod", "mean", "max", "min", "argmax", "argmin")


def _is_reduction(expression):
    """Whether the whole expression is one reduction, `sum(...)` (not `sum(a) + sum(b)`, nor the
    elementwise `max(a, b)`). Where this errs, it errs towards elementwise, which only keeps a
    tensor out of the plan."""
    m = re.match(r"([a-z]+)\(", expression)
    if not m or m.group(1) not in _REDUCTIONS:
        return False
    depth = 0
    for i in range(m.end() - 1, len(expression)):
        c = expression[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                return i == len(expression) - 1
        elif c == "," and depth == 1:
            return False
    return False


def _is_attribute(text, match):
    rest = text[match.end():].lstrip()
    return rest.startswith("=") and not rest.startswith("==")


def plan_memory(graph):
    """Renames, in `graph`'s statements, each stored intermediate (role "tensor", written once)
    to the declaration of an earlier one of the same type and shape whose last read came before
    the statement that writes it. Inputs, outputs and params never share. The ONNX names of the
    tensors that share a declaration leave `graph.names` (reading one would give another's
    value). Returns how many declarations were saved."""
    statements = [_Statement(text, graph.declared) for text in graph.statements]
    writers, readers, written_at, calls = {}, {}, {}, []
    for index, s in enumerate(statements):
        for n in s.written:
            writers[n] = writers.get(n, 0) + 1
            written_at.setdefault(n, []).append(index)
        for n in s.read:
            readers.setdefault(n, []).append(index)
        if s.is_call:
            calls.append(index)

    def inlined_at(index):
        """The reader a statement's tensor is inlined into, or None (inlining.h's rule)."""
        s = statements[index]
        if not s.elementwise or len(s.written) != 1:
            return None
        n = s.written[0]
        if writers.get(n) != 1 or n in s.read or len(readers.get(n, [])) != 1:
            return None
        at = readers[n][0]
        if at <= index or statements[at].is_call or any(index < c < at for c in calls):
            return None
        if any(index < w < at for r in s.read for w in written_at.get(r, [])):
            return None
        return at

    # Where each statement's reads happen: at the statement, or where its tensor is inlined.
    happens = list(range(len(statements)))
    inlined = set()
    for index in reversed(range(len(statements))):
        at = inlined_at(index)
        if at is not None:
            happens[index] = happens[at]
            inlined.add(statements[index].written[0])
    last_read = {}
    for index, s in enumerate(statements):
        for n in s.read:
            last_read[n] = max(last_read.get(n, -1), happens[index])
    planned = {n for n, (role, _) in graph.declared.items()
               if role == "tensor" and writers.get(n) == 1 and n not in inlined}

    rename, free, in_use = {}, {}, []  # in_use: (its last read, declaration, (type, shape))
    for index, s in enumerate(statements):
        for end, slot, key in [u for u in in_use if u[0] < index]:
            free.setdefault(key, []).append(slot)
        in_use = [u for u in in_use if u[0] >= index]
        for n in s.written:
            if n not in planned:
                continue
            value = graph.declared[n][1]
            key = (value.dtype, value.shape)
            slot = free[key].pop() if free.get(key) else n
            if slot != n:
                rename[n] = slot
            in_use.append((max(last_read.get(n, index), index), slot, key))
    if not rename:
        return 0

    def renamed(text):
        is_call = text.startswith("call ")
        return _IDENTIFIER.sub(lambda m: m.group(0) if is_call and _is_attribute(text, m)
                               else rename.get(m.group(0), m.group(0)), text)

    graph.statements = [renamed(text) for text in graph.statements]
    shared = set(rename) | set(rename.values())
    graph.names = {o: k for o, k in graph.names.items() if k not in shared}
    for n in rename:
        del graph.declared[n]
    graph.order = [n for n in graph.order if n not in rename]
    return len(rename)
