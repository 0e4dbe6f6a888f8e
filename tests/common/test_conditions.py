"""Breakpoint conditions: a small safe parser, never eval."""
from __future__ import annotations

import pytest

from tensorscope.common.conditions import ConditionError, digest_values, parse_condition
from tensorscope.common.events import CallDigest


@pytest.mark.parametrize("text,values,expected", [
    ("grad_norm > 100", {"grad_norm": 150.0}, True),
    ("grad_norm > 100", {"grad_norm": 50.0}, False),
    ("grad_norm > 100", {}, False),  # no value this step
    ("nan > 0", {"nan": 2.0}, True),
    ("max >= 1e4 and mean < 0", {"max": 1e4, "mean": -1.0}, True),
    ("max >= 1e4 and mean < 0", {"max": 1e4, "mean": 1.0}, False),
    ("std < 1e-6 or not (finite == 1)", {"std": 1.0, "finite": 0.0}, True),
    ("min < -5", {"min": -6.0}, True),
    ("-min > 5", {"min": -6.0}, True),
    ("max == inf", {"max": float("inf")}, True),
    ("(mean > 0) and (std != 0)", {"mean": 1.0, "std": 0.5}, True),
])
def test_evaluate(text, values, expected):
    assert parse_condition(text).evaluate(values) is expected


@pytest.mark.parametrize("text,match", [
    ("__import__('os').system('x')", "unexpected|unknown"),
    ("grad_norm >", "ends too early"),
    ("grad_norm 100", "comparison"),
    ("foo > 1", "unknown field"),
    ("finite_min > 1", "unknown field"),   # a slice's statistic: no digest carries it
    ("(mean > 0", "missing"),
    ("mean > 0 mean", "unexpected"),
    ("", "empty"),
    ("mean > 0; x", "unexpected character"),
])
def test_rejects(text, match):
    with pytest.raises(ConditionError, match=match):
        parse_condition(text)


def test_digest_values():
    d = CallDigest(stats={"mean": 1.0, "nan": 0.0}, grad_norm=3.0, finite=False)
    v = digest_values(d)
    assert v == {"mean": 1.0, "nan": 0.0, "grad_norm": 3.0, "finite": 0.0,
                 "inputs_finite": 1.0, "grad_finite": 1.0}
