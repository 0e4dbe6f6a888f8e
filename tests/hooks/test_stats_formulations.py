"""The capture's cheaper reductions give what the straightforward ones give.

``hooks.stats`` takes min and max with ``amin``/``amax`` instead of ``aminmax``
on large or non-contiguous CPU tensors, and counts the zeros of a strided
sample without gathering it first. These tests hold each formulation to the
plain torch computation it replaces, NaN and Inf included, on every float
dtype the capture sees.
"""
from __future__ import annotations

import math

import pytest
import torch

from tensorscope.hooks import stats
from tensorscope.hooks.stats import SAMPLE, ScalarBuffer, activation_stats, finite_probe, stats_from

nan, inf = math.nan, math.inf
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _stats(t: torch.Tensor, exact: bool, probe: bool = False) -> dict:
    buf = ScalarBuffer()
    with torch.no_grad():
        handle = finite_probe(t, buf) if probe else None
        slots = activation_stats(t, buf, exact, handle)
    return stats_from(slots, buf.flush())


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _strided_sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    n = flat.numel()
    return flat if n <= SAMPLE else flat[:: -(-n // SAMPLE)].contiguous()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [100, stats._SPLIT_MIN, 3 * stats._SPLIT_MIN + 5])
@pytest.mark.parametrize("bad", [None, nan, inf, -inf])
@pytest.mark.parametrize("exact", [True, False])
def test_min_and_max_are_aminmax_nan_and_inf_included(dtype, n, bad, exact):
    torch.manual_seed(n)
    t = (torch.randn(n) * 50).to(dtype)
    if bad is not None:
        t[n // 3] = bad   # in the middle of a vectorised block, not in the sample
    ref_min, ref_max = (float(v) for v in torch.aminmax(t))
    s = _stats(t, exact)
    assert _same(s["min"], ref_min) and _same(s["max"], ref_max), (s, ref_min, ref_max)


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_non_contiguous_tensor_has_the_statistics_of_its_contiguous_copy(dtype):
    torch.manual_seed(1)
    base = (torch.randn(3 * SAMPLE // 64 + 1, 64) * 4).to(dtype)
    base[5, 7] = -inf
    # a transposed tensor (reshaped into one copy) and a strided 1-dim view (kept a view)
    for t in (base.t(), base[:, 7], base.reshape(-1)[::3]):
        assert not t.is_contiguous()
        for exact in (True, False):
            a, b = _stats(t, exact), _stats(t.contiguous(), exact)
            assert set(a) == set(b)
            for key in a:
                assert _same(a[key], b[key]), (key, a, b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_exact_statistics_of_a_sampled_tensor_are_the_plain_reductions(dtype):
    torch.manual_seed(2)
    t = torch.randn(5 * SAMPLE + 7).clamp(min=-0.5).to(dtype)
    t[::7] = 0
    s = _stats(t, exact=True, probe=True)
    ref = t.double()
    sample = _strided_sample(t)
    assert s["sample"] == sample.numel() < t.numel()
    assert (s["min"], s["max"]) == (float(t.min()), float(t.max()))
    assert s["mean"] == pytest.approx(float(ref.mean()), rel=1e-5, abs=1e-6)
    assert s["norm"] == pytest.approx(float(ref.norm()), rel=1e-3)
    assert s["std"] == pytest.approx(float(ref.std()), rel=1e-3)
    # the zero fraction of the strided sample, counted the straightforward way
    assert s["zero_fraction"] == float((sample == 0).sum()) / sample.numel()
    assert s["nan"] == 0 and s["inf"] == 0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("exact", [True, False])
def test_nan_and_inf_in_a_sampled_tensor_are_counted_from_the_sample(dtype, exact):
    n = 5 * SAMPLE + 7
    step = -(-n // SAMPLE)
    t = torch.ones(n, dtype=dtype)
    t[0], t[step], t[2 * step] = nan, inf, -inf   # in the sample
    t[1] = nan                                      # not in it
    s = _stats(t, exact, probe=True)
    sample = _strided_sample(t)
    scale = n / sample.numel()
    assert s["nan"] == round(int(torch.isnan(sample).sum()) * scale)
    assert s["inf"] == round(int(torch.isinf(sample).sum()) * scale)
    assert all(math.isnan(s[k]) for k in ("min", "max", "mean", "std", "norm"))
    # NaN is not zero
    assert s["zero_fraction"] == 0.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_an_infinity_the_sample_missed_still_shows(dtype):
    t = torch.full((5 * SAMPLE + 7,), 2.0, dtype=dtype)
    t[1] = -inf   # not in the strided sample
    s = _stats(t, exact=True, probe=True)
    assert (s["min"], s["max"], s["mean"], s["norm"]) == (-inf, 2.0, -inf, inf)
    assert math.isnan(s["std"]) and s["inf"] >= 1 and s["nan"] == 0


def test_negative_zero_counts_as_zero_and_as_the_extremes():
    t = torch.zeros(4 * stats._SPLIT_MIN)
    t[::2] = -0.0
    s = _stats(t, exact=True)
    assert s["min"] == 0.0 and s["max"] == 0.0 and s["zero_fraction"] == 1.0
    assert s["norm"] == 0.0 and s["std"] == 0.0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1000, SAMPLE, 5 * SAMPLE + 7])
@pytest.mark.parametrize("exact", [True, False])
def test_the_zero_fraction_is_the_samples_share_of_zeros(dtype, n, exact):
    """Zeros in no order (a ReLU's output), -0.0 among them, NaN counted as non-zero."""
    torch.manual_seed(n)
    t = torch.relu(torch.randn(n)).to(dtype)
    t[::5] = -0.0
    t[3::17] = nan
    sample = _strided_sample(t)
    s = _stats(t, exact, probe=True)
    assert s["zero_fraction"] == float((sample == 0).sum()) / sample.numel()
    assert s.get("sample", n) == sample.numel()


class _DeviceStandIn(ScalarBuffer):
    """A buffer that keeps every value a tensor, as for an accelerator, so that
    ``flush`` takes the one-transfer path (stack, cat, one ``tolist``)."""

    def add(self, t: torch.Tensor) -> int:
        self.items.append(t)
        self.on_device = True
        return len(self.items) - 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("exact", [True, False])
def test_the_one_transfer_gives_the_values_read_on_the_cpu(dtype, exact):
    """Mixed result dtypes (half min/max, float32 sums, int32 counts) stacked into one
    transfer keep every value exact: a count of 16383 is not a float16 number."""
    t = torch.ones(5 * SAMPLE + 7, dtype=dtype)
    t[::-(-t.numel() // SAMPLE)][:1] = 0   # one zero in the sample: 16383 non-zeros
    t[7] = inf

    def through(buf: ScalarBuffer) -> dict:
        with torch.no_grad():
            slots = activation_stats(t, buf, exact, finite_probe(t, buf))
        return stats_from(slots, buf.flush())

    cpu, device = through(ScalarBuffer()), through(_DeviceStandIn())
    assert set(cpu) == set(device)
    for key in cpu:
        assert _same(cpu[key], device[key]), (key, cpu, device)
    assert device["zero_fraction"] == 1 / device["sample"]
