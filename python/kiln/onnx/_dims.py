"""Dimensions as the importer holds them: an int, a size's name ("seq"), or a size times a
positive integer ("8*seq", as the language writes such a dimension). Shape arithmetic and
reshapes work on them as monomials (coefficient, sizes). A product of two sizes ("seq*batch",
what a model computes to flatten a batch of sequences) is one too, but no dimension can be
declared with it (a tensor's dimensions are affine in the sizes): a reshape to it declares the
sizes as dimensions of their own (`factors`)."""

import re

import numpy as np

_FACTOR = re.compile(r"^(?:[0-9]+|[A-Za-z_][A-Za-z0-9_]*)$")


def monomial(d):
    """(coefficient, sorted tuple of sizes) of a dimension or of a product of them."""
    if isinstance(d, tuple):
        return d
    if isinstance(d, (int, np.integer)):
        return int(d), ()
    factors = d.split("*")
    if not all(_FACTOR.match(f) for f in factors):
        raise ValueError(f"not a dimension: {d!r}")
    coef = 1
    for f in factors:
        coef *= int(f) if f[0].isdigit() else 1
    return coef, tuple(sorted(f for f in factors if not f[0].isdigit()))


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


def expression(m):
    """A monomial as shape arithmetic holds it: an int, "seq", "8*seq" or "seq*batch"."""
    coef, sizes = monomial(m)
    if not sizes:
        return coef
    return "*".join(([str(coef)] if coef != 1 else []) + list(sizes))


def factors(d, order):
    """The dimensions a product of sizes is declared as: its sizes in `order` (sizes not in it
    last), the coefficient on the first; a dimension that can be declared stays as it is."""
    coef, sizes = monomial(d)
    if len(sizes) < 2:
        return [dimension(d)]
    ranked = sorted(sizes, key=lambda s: order.index(s) if s in order else len(order))
    return [dimension((coef, (ranked[0],)))] + list(ranked[1:])


def count(shape):
    """The number of elements of a shape, as a monomial."""
    m = (1, ())
    for d in shape:
        m = times(m, d)
    return m
