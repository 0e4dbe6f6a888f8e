"""The safe slice parser and the slice codec over every dtype family."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tensorscope.common.slicing import SliceError, decode_slice, parse_slice
from tensorscope.training.slice_encode import encode_slice


@pytest.mark.parametrize("text,ndim,expected", [
    ("", 3, ()),
    ("0, :, 3:10", 3, (0, slice(None), slice(3, 10))),
    ("..., -1", 4, (Ellipsis, -1)),
    ("::2", 1, (slice(None, None, 2),)),
    ("[1, 2]", 2, (1, 2)),
    (" 1 , ", 2, (1,)),
])
def test_parse_slice(text, ndim, expected):
    assert parse_slice(text, ndim) == expected


@pytest.mark.parametrize("text,ndim,match", [
    ("__import__('os')", 1, "not an integer"),
    ("1, 2, 3", 2, "3 indices"),
    ("..., ...", 2, "one '...'"),
    ("::-1", 1, "positive"),
    ("1:2:3:4", 1, "at most"),
    ("1,,2", 3, "empty"),
    ("x" * 2000, 1, "too long"),
])
def test_parse_slice_rejects(text, ndim, match):
    with pytest.raises(SliceError, match=match):
        parse_slice(text, ndim)


def test_slice_values_and_whole_tensor_stats():
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    body = encode_slice(t, "1, :, 1:3", ref="r")
    arr = decode_slice(body)
    np.testing.assert_array_equal(arr, t[1, :, 1:3].numpy())
    assert body["full_shape"] == [2, 3, 4] and body["original_dtype"] == "float32"
    assert body["stats"]["max"] == 23 and body["stats"]["mean"] == pytest.approx(11.5)
    assert body["stats"]["std"] == pytest.approx(t.std().item())
    assert body["truncated"] is False


def test_out_of_range_index_is_a_slice_error():
    with pytest.raises(SliceError, match="out of range"):
        encode_slice(torch.zeros(2, 2), "5")


def test_element_budget_trims_leading_dims():
    t = torch.arange(10000, dtype=torch.float64).reshape(100, 100)
    body = encode_slice(t, ":, :", max_elements=250)
    arr = decode_slice(body)
    assert body["truncated"] and arr.shape == (2, 100)
    np.testing.assert_array_equal(arr, t[:2].numpy())


@pytest.mark.parametrize("dtype,transport", [
    (torch.bfloat16, "float32"), (torch.float16, "float16"), (torch.bool, "bool"),
    (torch.complex64, "complex64"), (torch.complex128, "complex128"), (torch.int64, "int64"),
    (torch.uint8, "uint8"), (torch.int8, "int8"),
])
def test_dtypes(dtype, transport):
    base = torch.tensor([[0, 1.5, -2], [3, 0, 4]])
    t = (base != 0) if dtype == torch.bool else base.to(dtype)
    if dtype.is_complex:
        t = t + 1j * t
    body = encode_slice(t, "")
    assert body["dtype"] == transport
    assert body["original_dtype"] == str(dtype).replace("torch.", "")
    arr = decode_slice(body)
    expected = t.to(torch.float32).numpy() if dtype == torch.bfloat16 else t.numpy()
    np.testing.assert_array_equal(arr, expected)
    assert body["stats"]


def test_nan_and_inf_counted_in_stats():
    body = encode_slice(torch.tensor([1.0, float("nan"), float("inf"), 3.0]), "")
    s = body["stats"]
    assert s["nan"] == 1 and s["inf"] == 1 and s["finite_max"] == 3 and s["finite_mean"] == 2
    assert math.isnan(s["max"]) and math.isnan(s["mean"])   # NaN propagates (the catalogue)


def test_decode_slice_rejects_bad_bodies():
    good = encode_slice(torch.ones(2, 2), "")
    with pytest.raises(SliceError, match="dtype"):
        decode_slice({**good, "dtype": "object"})
    with pytest.raises(SliceError, match="bytes"):
        decode_slice({**good, "data": good["data"][:-1]})
    with pytest.raises(SliceError, match="shape"):
        decode_slice({**good, "shape": [-1]})


def test_statistics_of_an_all_nan_tensor_are_nan_not_the_float_limits():
    from tensorscope.training.slice_torch import chunked_stats
    stats = chunked_stats(torch.full((4,), float("nan")))
    assert all(math.isnan(stats[k]) for k in ("min", "max", "mean", "std", "norm"))
    assert all(math.isnan(stats[f"finite_{k}"]) for k in ("min", "max", "mean", "std"))
    assert stats["nan"] == 4
    scalar = chunked_stats(torch.tensor(float("nan")))
    assert math.isnan(scalar["finite_min"]) and math.isnan(scalar["finite_max"])
    mixed = chunked_stats(torch.tensor([1.0, float("nan"), 3.0]))
    assert (mixed["finite_min"], mixed["finite_max"], mixed["nan"]) == (1.0, 3.0, 1)
