import random

import pytest

from scalestudy.measure.intervals import clip, intersection, subtract, total, union


def test_union_merges_overlapping_nested_and_touching():
    assert union([(5, 7), (0, 2), (1, 3), (6, 6.5), (7, 8)]) == [(0, 3), (5, 8)]


def test_union_of_several_sets_drops_empty_intervals():
    assert union([(0, 1)], [(2, 2), (3, 1)], [(0.5, 1.5)]) == [(0, 1.5)]
    assert union() == []


def test_intersection():
    a = [(0, 4), (6, 10)]
    b = [(2, 7), (9, 12)]
    assert intersection(a, b) == [(2, 4), (6, 7), (9, 10)]
    assert intersection(a, []) == []
    assert intersection([(0, 1)], [(1, 2)]) == []


def test_subtract():
    a = [(0, 10)]
    b = [(1, 2), (4, 6), (5, 7), (9, 12)]
    assert subtract(a, b) == [(0, 1), (2, 4), (7, 9)]
    assert subtract(a, []) == [(0, 10)]
    assert subtract([], b) == []
    assert subtract([(0, 1), (3, 4)], [(-1, 5)]) == []


def test_clip_and_total():
    assert clip([(0, 3), (5, 9)], 2, 6) == [(2, 3), (5, 6)]
    assert total([(0, 2), (1, 3), (10, 11)]) == 4


def _grid_measure(sets_fn, n=200):
    """Brute-force length on a grid of unit cells, for random integer intervals."""
    return sum(1 for i in range(n) if sets_fn(i + 0.5))


@pytest.mark.parametrize("seed", range(20))
def test_algebra_matches_brute_force(seed):
    rng = random.Random(seed)

    def rand_set():
        out = []
        for _ in range(rng.randint(0, 8)):
            s = rng.randint(0, 190)
            out.append((s, s + rng.randint(0, 30)))
        return out

    a, b = rand_set(), rand_set()

    def inside(x, s):
        return any(lo <= x < hi for lo, hi in s)

    assert total(union(a, b)) == _grid_measure(lambda x: inside(x, a) or inside(x, b), 230)
    assert total(intersection(a, b)) == _grid_measure(lambda x: inside(x, a) and inside(x, b), 230)
    assert total(subtract(a, b)) == _grid_measure(lambda x: inside(x, a) and not inside(x, b), 230)
    for result in (union(a, b), intersection(a, b), subtract(a, b)):
        assert all(s < e for s, e in result)
        assert all(result[i][1] < result[i + 1][0] for i in range(len(result) - 1))
