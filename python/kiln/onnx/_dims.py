"""Dimensions as the importer holds them: an int, a size's name ("seq"), or a size times a
positive integer ("8*seq", as the language writes such a dimension). Shape arithmetic and
reshapes work on them as monomials (coefficient, sizes): a product of two sizes is one, but no
dimension can be declared with it (a tensor's dimensions are affine in the sizes)."""

import re

import numpy as np

_SCALED = re.compile(r"^(?:([0-9]+)\*)?([A-Za-z_][A-Za-z0-9_]*)$")


def monomial(d):
    """(coefficient, sorted tuple of sizes) of a dimension or of a product of them."""
    if isinstance(d, tuple):
        return d
    if isinstance(d, (int, np.integer)):
        return int(d), ()
    m = _SCALED.match(d)
    if m is None:
        raise ValueError(f"not a dimension: {d!r}")
    return int(m.group(1) or 1), (m.group(2),)


def times(a, b):
    (ca, sa), (cb, sb) = monomial(a), monomial(b)
    return ca * cb, tuple(sorted(sa + sb))


def divides(a, b):
    """Whether b is a (whole) multiple of a, whatever values the sizes take."""
    (ca, sa), (cb, sb) = monomial(a), monomial(b)
    rest = list(sb)
    for s in sa:
        if s not in rest:
            return False
        rest.remove(s)
    return ca != 0 and cb % ca == 0


def quotient(b, a):
    """b / a where divides(a, b)."""
    (ca, sa), (cb, sb) = monomial(a), monomial(b)
    rest = list(sb)
    for s in sa:
        rest.remove(s)
    return cb // ca, tuple(rest)


def dimension(m):
    """The dimension a monomial declares: an int, "seq" or "8*seq"; None for a product of
    sizes, or a multiple of a size that is not positive."""
    coef, sizes = monomial(m)
    if not sizes:
        return coef
    if len(sizes) > 1 or coef < 1:
        return None
    return sizes[0] if coef == 1 else f"{coef}*{sizes[0]}"


def count(shape):
    """The number of elements of a shape, as a monomial."""
    m = (1, ())
    for d in shape:
        m = times(m, d)
    return m
