"""Algebra on sets of time intervals, each set a list of half-open (start, end) pairs.

Every function returns a normalised set: sorted, disjoint, non-empty intervals, where
touching intervals are merged. Inputs need not be normalised.
"""

from __future__ import annotations

from typing import Iterable

Interval = tuple[float, float]


def union(*sets: Iterable[Interval]) -> list[Interval]:
    """The union of interval sets, sorted and merged (empty intervals dropped)."""
    pairs = sorted((s, e) for intervals in sets for s, e in intervals if e > s)
    out: list[Interval] = []
    for s, e in pairs:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def intersection(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """The intervals covered by both `a` and `b`, sorted and merged."""
    a, b = union(a), union(b)
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """The parts of `a` that no interval of `b` covers."""
    a, b = union(a), union(b)
    out: list[Interval] = []
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def clip(a: Iterable[Interval], lo: float, hi: float) -> list[Interval]:
    """The parts of `a` within [lo, hi]."""
    return intersection(a, [(lo, hi)])


def total(a: Iterable[Interval]) -> float:
    """Length of the union of `a` (overlaps counted once)."""
    return sum(e - s for s, e in union(a))
