"""Item 2 (the slice bound) and the get-tensor row of the hardening issue: a slice request
costs memory in proportion to the slice (plus O(nnz) for a sparse tensor, plus one
statistics chunk), never a whole-tensor ``to_dense`` or mask. Measured in a fresh
subprocess by its peak RSS."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from tensorscope.common.slicing import decode_slice
from tensorscope.training.slice_encode import encode_slice

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent("""
    import json, resource, sys
    import torch
    from tensorscope.training.slice_encode import encode_slice

    kind = sys.argv[1]
    if kind == "sparse":
        n = 15000
        i = torch.arange(n)
        t = torch.sparse_coo_tensor(torch.stack([i, i]), torch.ones(n), (n, n))
        text = "0:2, 0:2"
    else:
        t = torch.randn(50_000_000)
        text = "0:1000"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    body = encode_slice(t, text)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"grew_mib": (after - before) / 1024, "shape": body["shape"],
                      "stats": body["stats"]}))
""")


def _probe(kind: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_small_slice_of_a_huge_sparse_tensor_is_never_made_dense():
    got = _probe("sparse")
    assert got["shape"] == [2, 2]
    assert got["grew_mib"] < 100, got   # to_dense() of 15000x15000 float32 is 858 MiB
    assert got["stats"]["max"] == 1.0


def test_a_small_slice_of_a_large_dense_tensor_takes_stats_in_chunks():
    got = _probe("dense")
    assert got["shape"] == [1000]
    assert got["grew_mib"] < 200, got   # whole-tensor masks and copies were ~430 MiB
    assert abs(got["stats"]["mean"]) < 1e-3 and abs(got["stats"]["std"] - 1) < 1e-3


@pytest.mark.parametrize("make", [
    lambda: torch.randn(7, 5),
    lambda: torch.tensor([[1.0, float("nan")], [float("inf"), -2.0]]),
    lambda: torch.randint(-3, 9, (4, 6)),
    lambda: torch.rand(3, 4) > 0.5,
    lambda: torch.randn(6, 4, dtype=torch.float16),
    lambda: torch.randn(9, 9).t(),
])
def test_chunked_statistics_equal_the_whole_tensor_ones(make, monkeypatch):
    from tensorscope.training import slice_torch

    t = make()
    want = slice_torch.chunked_stats(t)            # one chunk
    monkeypatch.setattr(slice_torch, "CHUNK", 5)   # many chunks, non-contiguous rows
    got = slice_torch.chunked_stats(t)
    assert got.keys() == want.keys()
    for k in want:
        assert np.isclose(got[k], want[k], rtol=1e-5, atol=1e-6, equal_nan=True), (k, got, want)


def test_sparse_and_float8_slices_are_served():
    dense = torch.arange(24.0).reshape(4, 6)
    dense[dense % 5 != 0] = 0
    for t in (dense.to_sparse(), dense.to_sparse_csr()):
        body = encode_slice(t, "1:3, ::2")
        assert np.array_equal(decode_slice(body), dense[1:3, ::2].numpy())
    f8 = torch.linspace(-4, 4, 10).to(torch.float8_e4m3fn)
    body = encode_slice(f8, "2:5")
    assert body["original_dtype"] == "float8_e4m3fn"
    assert np.array_equal(decode_slice(body), f8[2:5].float().numpy())
    assert body["stats"]["max"] == 4.0
