import math

import pytest

from scalestudy.analysis import stats


@pytest.mark.parametrize(
    "df,expected",
    [
        (1, 12.706204736174698),
        (2, 4.302652729749464),
        (4, 2.7764451051977987),
        (10, 2.2281388519862744),
        (30, 2.0422724563012373),
    ],
)
def test_t_quantile_matches_tables(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, rel=1e-9)


def test_summarize_three_values_by_hand():
    s = stats.summarize([10.0, 12.0, 14.0, None, float("nan")])
    assert s.n == 3 and s.mean == 12.0 and s.std == pytest.approx(2.0)
    half = 4.302652729749464 * 2.0 / math.sqrt(3)
    assert s.ci95_low == pytest.approx(12.0 - half) and s.ci95_high == pytest.approx(12.0 + half)
    assert s.note == ""


def test_summarize_one_and_no_value_say_so():
    one = stats.summarize([5.0])
    assert (one.n, one.mean, one.std, one.ci95_low, one.ci95_high) == (1, 5.0, None, None, None)
    assert one.note == stats.NOTE_ONE_VALUE
    none = stats.summarize([None])
    assert none.n == 0 and none.mean is None and none.note == stats.NOTE_NO_VALUES


def test_relative_change_and_difference():
    a = stats.summarize([100.0, 102.0, 98.0])
    b = stats.summarize([63.0, 62.0, 64.0])
    rc = stats.relative_change(a, b)
    assert rc.value == pytest.approx(0.63 - 1)
    assert rc.ci95_low < rc.value < rc.ci95_high
    assert stats.relative_change(stats.summarize([1.0]), b).ci95_low is None
    d = stats.difference(a, b)
    assert d.value == pytest.approx(-37.0) and d.ci95_low < -37.0 < d.ci95_high
