"""One key, one meaning: the capture's statistics and a tensor slice's agree.

Both implementations (``hooks.stats``, on device on the hot path, and
``training.slice_torch.chunked_stats``, exact and chunked) run on the same
tensors; every key the capture gives means what the slice's does, as the
catalogue (``common.statistics``) defines it, NaN and Inf included.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tensorscope.common import statistics
from tensorscope.hooks.stats import SAMPLE, ScalarBuffer, activation_stats, stats_from
from tensorscope.training import slice_torch
from tensorscope.training.slice_encode import encode_slice

nan, inf = math.nan, math.inf


def _captured(t: torch.Tensor, exact: bool) -> dict | None:
    buf = ScalarBuffer()
    with torch.no_grad():
        slots = activation_stats(t, buf, exact, None)
    return None if slots is None else stats_from(slots, buf.flush())


def _kind(t: torch.Tensor) -> str:
    if t.dtype == torch.bool:
        return statistics.BOOL
    return statistics.FLOAT if t.is_floating_point() or t.is_complex() else statistics.INT


def _close(a: float, b: float) -> bool:
    return bool(np.isclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True))


TENSORS = {
    "randn": lambda: torch.randn(7, 5) * 3 + 1,
    "nan": lambda: torch.tensor([[1.0, nan], [2.0, -2.0]]),
    "pos_inf": lambda: torch.tensor([1.0, inf, 0.0, 3.0]),
    "neg_inf": lambda: torch.tensor([1.0, -inf, 0.0, 3.0]),
    "both_inf": lambda: torch.tensor([1.0, inf, -inf, 3.0]),
    "nan_and_inf": lambda: torch.tensor([nan, inf, 2.0, 0.0]),
    "all_nan": lambda: torch.full((4,), nan),
    "all_inf": lambda: torch.full((3,), inf),
    "one_value": lambda: torch.tensor([2.5]),
    "scalar": lambda: torch.tensor(-4.0),
    "zeros": lambda: torch.zeros(6),
    "half": lambda: torch.randn(6, 4, dtype=torch.float16),
    "bfloat16_nan": lambda: torch.tensor([1.0, nan, 2.0], dtype=torch.bfloat16),
    "float64": lambda: torch.randn(9, 9, dtype=torch.float64).t(),
    "complex": lambda: torch.tensor([3 + 4j, 0j, complex(nan, 0)]),
    "int": lambda: torch.randint(-3, 9, (4, 6)),
    "uint8": lambda: torch.tensor([0, 255, 7], dtype=torch.uint8),
    "bool": lambda: torch.rand(3, 4) > 0.5,
}


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("name", list(TENSORS))
def test_capture_and_slice_agree_on_every_key(name, exact, monkeypatch):
    torch.manual_seed(0)
    monkeypatch.setattr(slice_torch, "CHUNK", 5)   # many chunks
    t = TENSORS[name]()
    cap, sl = _captured(t, exact), slice_torch.chunked_stats(t)
    kind = _kind(t)
    assert set(sl) == set(statistics.keys_for(kind))
    assert set(cap) - {"sample"} == set(statistics.keys_for(kind, captured=True))
    for key in set(cap) - {"sample"}:
        assert _close(cap[key], sl[key]), (key, cap, sl)


def test_empty_tensors_have_no_statistics_in_either():
    for t in (torch.zeros(0), torch.zeros(3, 0, dtype=torch.int64), torch.zeros(0, dtype=torch.bool)):
        assert _captured(t, True) is None and slice_torch.chunked_stats(t) == {}


def test_nan_and_inf_propagate_and_the_finite_keys_look_past_them():
    s = encode_slice(torch.tensor([1.0, nan, inf, 3.0]), "")["stats"]
    assert all(math.isnan(s[k]) for k in ("min", "max", "mean", "std", "norm"))
    assert (s["nan"], s["inf"]) == (1, 1)
    assert (s["finite_min"], s["finite_max"], s["finite_mean"]) == (1.0, 3.0, 2.0)
    assert s["finite_std"] == pytest.approx(math.sqrt(2))
    s = slice_torch.chunked_stats(torch.tensor([1.0, -inf, 3.0]))
    assert (s["min"], s["max"], s["mean"], s["norm"]) == (-inf, 3.0, -inf, inf)
    assert math.isnan(s["std"]) and s["finite_min"] == 1.0
    none = slice_torch.chunked_stats(torch.full((2,), nan))
    assert all(math.isnan(none[f"finite_{k}"]) for k in ("min", "max", "mean", "std"))


def test_a_sampled_capture_still_shows_a_value_its_sample_missed():
    big = torch.ones(100 * SAMPLE)
    big[5] = inf   # not in the strided sample
    s = _captured(big, exact=False)
    assert "sample" in s and s["inf"] >= 1
    assert (s["max"], s["norm"], s["mean"]) == (inf, inf, inf) and math.isnan(s["std"])
    big[5] = nan
    s = _captured(big, exact=False)
    assert s["nan"] >= 1 and all(math.isnan(s[k]) for k in ("min", "max", "mean", "std", "norm"))


def test_the_catalogue_names_one_meaning_per_key():
    keys = [s.key for s in statistics.STATISTICS]
    assert len(keys) == len(set(keys)) and all(s.meaning for s in statistics.STATISTICS)
    for s in statistics.STATISTICS:
        if s.finite_of is not None:
            assert not s.captured and s.finite_of in statistics.BY_KEY
