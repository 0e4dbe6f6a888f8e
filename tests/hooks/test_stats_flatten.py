"""On-device statistics against torch's own reductions; nested input/output paths."""
from __future__ import annotations

import dataclasses
import math
from collections import namedtuple

import pytest
import torch

from tensorscope.hooks.flatten import flatten, flatten_args, meta
from tensorscope.hooks.stats import SAMPLE, ScalarBuffer, activation_stats, finite_probe, stats_from


def _stats(t: torch.Tensor, exact: bool) -> dict:
    buf = ScalarBuffer()
    slots = activation_stats(t, buf, exact, None)
    return stats_from(slots, buf.flush())


@pytest.mark.parametrize("exact", [True, False])
def test_float_stats_match_torch(exact):
    torch.manual_seed(0)
    t = torch.randn(64, 100) * 3 + 1
    t[0, :10] = 0
    s = _stats(t, exact)
    assert s["min"] == t.min().item() and s["max"] == t.max().item()
    assert s["mean"] == pytest.approx(t.mean().item(), rel=1e-5)
    assert s["std"] == pytest.approx(t.std().item(), rel=1e-4)
    assert s["norm"] == pytest.approx(t.norm().item(), rel=1e-5)
    assert s["zero_fraction"] == pytest.approx(10 / t.numel())
    assert s["nan"] == 0 and s["inf"] == 0 and "sample" not in s


def test_large_tensor_is_sampled_but_min_max_mean_exact():
    torch.manual_seed(0)
    t = torch.randn(4 * SAMPLE + 3)
    s = _stats(t, exact=False)
    assert s["sample"] <= SAMPLE
    assert s["min"] == t.min().item() and s["mean"] == pytest.approx(t.mean().item(), abs=1e-6)
    assert s["std"] == pytest.approx(1.0, rel=0.05) and s["norm"] == pytest.approx(t.norm().item(), rel=0.05)
    half_zero = torch.randn(4 * SAMPLE + 3).clamp(min=0)
    z = _stats(half_zero, exact=False)["zero_fraction"]
    assert "sample" in _stats(half_zero, exact=False) and z == pytest.approx(0.5, abs=0.05)


def test_nan_and_inf_are_counted_and_never_hidden():
    t = torch.ones(1000)
    t[3], t[7], t[9] = math.nan, math.inf, -math.inf
    s = _stats(t, exact=True)
    assert s["nan"] == 1 and s["inf"] == 2 and math.isnan(s["mean"])
    big = torch.ones(100 * SAMPLE)
    big[5] = math.nan  # missed by the strided sample, shown by min/max
    s = _stats(big, exact=False)
    assert s["nan"] >= 1


def test_integer_bool_half_and_complex():
    ints = torch.tensor([0, 1, 2, 3, 4, 0])
    s = _stats(ints, exact=False)
    assert (s["min"], s["max"], s["mean"], s["zero_fraction"]) == (0, 4, 10 / 6, 2 / 6)
    b = _stats(torch.tensor([True, False, True, True]), exact=True)
    assert b["mean"] == 0.75 and b["zero_fraction"] == 0.25
    h = torch.full((100,), 60000.0, dtype=torch.float16)  # the sum overflows fp16, not fp32
    buf = ScalarBuffer()
    probe = finite_probe(h, buf)
    assert math.isfinite(buf.flush()[probe])
    c = _stats(torch.tensor([3 + 4j, 0j]), exact=True)
    assert c["max"] == 5.0 and c["mean"] == 2.5


def test_scalar_buffer_one_transfer_of_mixed_values():
    buf = ScalarBuffer()
    a = buf.add(torch.tensor(1.5))
    b = buf.add_vector(torch.tensor([2.0, 3.0], dtype=torch.float64))
    c = buf.add(torch.tensor(7))
    d = buf.add(torch.tensor(0.5, dtype=torch.bfloat16))
    assert len(buf) == 5
    v = buf.flush()
    assert (v[a], v[b.start], v[b.start + 1], v[c], v[d]) == (1.5, 2.0, 3.0, 7.0, 0.5)
    assert len(buf) == 0 and buf.flush() == []


Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Result:
    loss: torch.Tensor
    note: str = "x"


def test_flatten_nested_structures():
    x, y = torch.zeros(2), torch.ones(3)
    out = flatten(((x, None), {"logits": y, 3: [Pair(x, 1)]}, Result(y)), "out")
    assert [p for p, _ in out] == ["out[0][0]", "out[0][1]", 'out[1]["logits"]',
                                   "out[1][3][0].left", "out[1][3][0].right",
                                   "out[2].loss", "out[2].note"]
    assert out[0][1] is x and out[2][1] is y
    assert flatten(x, "out") == [("out", x)]
    args = flatten_args((x, 2), {"mask": y})
    assert [p for p, _ in args] == ["in[0]", "in[1]", 'in["mask"]']


def test_meta_of_tensors_and_objects():
    t = torch.zeros(4, 6, dtype=torch.float16).t()
    m = meta("in[0]", t)
    assert m == {"path": "in[0]", "kind": "tensor", "shape": [6, 4], "dtype": "float16",
                 "device": "cpu", "requires_grad": False, "contiguous": False, "numel": 24,
                 "bytes": 48}
    assert meta("out[1]", None)["kind"] == "none"
    assert meta("out[2]", "hi")["dtype"] == "str" and meta("out[2]", "hi")["shape"] is None
