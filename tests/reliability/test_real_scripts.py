"""Things real training scripts do, run plainly and under ``tensorscope run``: the
output, the exit code and the absence of any TensorScope traceback must match."""
from __future__ import annotations

import pytest

import reliability_runs as runs

pytestmark = pytest.mark.slow

TRACE = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = model(torch.randn(3, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()))
    # trace a fresh module while the trained one's parameters exist (a graph of its own)
    head = torch.jit.trace(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), torch.randn(1, 2))
    exported = torch.jit.trace(model, torch.randn(1, 4))
    print(sorted(n.kind() for n in exported.graph.nodes() if n.kind().startswith("aten::")))
    for step in range(2):
        loss = head(model(torch.randn(3, 4))).sum()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()))
"""


def test_jit_trace_during_training_is_never_captured(tmp_path):
    """Tracing records every op: a hook's own ops made the tracer refuse the other
    model's parameters, and the process died in the tracer."""
    script = runs.write(tmp_path, "trace.py", TRACE)
    base = runs.plain(script)
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")))
    assert base.rc == 0 and base.out.count("loss") == 4, base.err
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert "Traceback" not in res.err and "internal error" not in res.err


META = """
    import torch
    from torch import nn

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2))
    for _ in range(3):   # a meta forward to see the shapes, as model-sizing code does
        print(model(torch.randn(8, 64, device="meta", requires_grad=True)).shape)
    model = model.to_empty(device="cpu")
    torch.manual_seed(0)
    for p in model.parameters():
        nn.init.normal_(p, std=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()))
"""


def test_a_meta_forward_is_no_diagnostic_failure(tmp_path):
    """A meta ReLU output reached the dead-activation check's deferred count."""
    script = runs.write(tmp_path, "meta.py", META)
    base = runs.plain(script)
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")))
    assert base.rc == 0 and base.out.count("loss") == 2, base.err
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert "internal error" not in res.err and "internal_error" not in res.err
