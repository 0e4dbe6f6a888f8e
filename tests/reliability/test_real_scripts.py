"""Things real training scripts do, run plainly and under ``tensorscope run``: the
output, the exit code and the absence of any TensorScope traceback must match."""
from __future__ import annotations

import json

import pytest

import reliability_runs as runs
from tensorscope.viewer.reader import SessionReader

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
    # the meta forwards store nothing: no unused-graph warning; the replaced parameters
    # (to_empty) are the ones tracked, under their names
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["findings"] == []
    assert sorted(p["name"] for p in report["parameters"]) == [
        "0.bias", "0.weight", "2.bias", "2.weight"]
    assert all(p["in_optimizer"] for p in report["parameters"])


LAZY = """
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.LazyConv2d(4, 3)
            self.fc = nn.LazyLinear(3)
            self.spare = nn.LazyLinear(5)   # never called: stays uninitialised

        def forward(self, x):
            return self.fc(self.conv(x).relu().flatten(1))

    model = Net()
    if "--watch" in sys.argv:
        import tensorscope
        tensorscope.watch(model, report=sys.argv[-1])
    model(torch.randn(2, 3, 6, 6))   # the dummy batch that sizes the lazy layers
    opt = torch.optim.SGD(list(model.conv.parameters()) + list(model.fc.parameters()), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(2, 3, 6, 6)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()))
"""


def test_lazy_modules_before_their_first_forward(tmp_path):
    """Uninitialised parameters have no size: counting them failed the root's first
    call under ``run``, and made ``watch()`` itself raise into the script."""
    script = runs.write(tmp_path, "lazy.py", LAZY)
    base = runs.plain(script)
    assert base.rc == 0 and base.out.count("loss") == 3, base.err
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")))
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert "internal error" not in res.err
    rows = {p["name"]: p for p in json.loads((tmp_path / "r.json").read_text())["parameters"]}
    assert rows["fc.weight"]["shape"] == [3, 64] and "spare.weight" not in rows
    watched = runs.plain(script, "--watch", str(tmp_path / "w.json"))
    assert (watched.rc, watched.out) == (base.rc, base.out), watched.err
    assert "internal error" not in watched.err


UNCLOSED = """
    import sys
    import torch
    from torch import nn
    import tensorscope

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tensorscope.watch(model, opt, report=sys.argv[1], record=sys.argv[2])  # never closed
    for step in range(3):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()))
    if "--raise" in sys.argv:
        raise ValueError("the script's own error")
"""


@pytest.mark.parametrize("flag,code", [("", 0), ("--raise", 1)])
def test_a_watch_never_closed_still_writes_its_report(tmp_path, flag, code):
    """``tensorscope.watch(...)`` at the top of a script, no ``with``: the report was
    never written and the recording never ended."""
    script = runs.write(tmp_path, "unclosed.py", UNCLOSED)
    report, record = tmp_path / "r.json", tmp_path / "r.tscope"
    res = runs.plain(script, str(report), str(record), *([flag] if flag else []))
    assert res.rc == code and res.out.count("loss") == 3, res.err
    data = json.loads(report.read_text())
    assert data["steps"] == 3 and data["exit_code"] == code
    with SessionReader(str(record)) as reader:
        byes = [m for m in reader.messages() if m.TYPE == "bye"]
        assert reader.steps
    assert [b.exit_code for b in byes] == [code]


SWEEP = """
    import sys
    import torch
    import torch.multiprocessing as mp
    from torch import nn

    def train(index, lrs):   # one independent model per process: no process group
        torch.manual_seed(index)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=lrs[index])
        for _ in range(2):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
        # one write per line: two processes printing piece by piece to one pipe can
        # interleave inside a line ('workerworker 0 ...')
        sys.stdout.write(f"worker {index} {round(loss.item(), 6)}\\n")
        sys.stdout.flush()

    if __name__ == "__main__":
        mp.spawn(train, args=([0.1, 0.01],), nprocs=2)
"""


def test_spawned_workers_without_a_process_group_are_not_called_diverged(tmp_path):
    """Independent models in ``mp.spawn`` children (a sweep) are ranks by index only:
    their different parameters were reported as a rank_divergence error."""
    script = runs.write(tmp_path, "sweep.py", SWEEP)
    base = runs.plain(script)
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")))
    assert base.rc == res.rc == 0, res.err
    assert sorted(res.out.splitlines()) == sorted(base.out.splitlines())
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["steps"] for r in report["ranks"]] == [2, 2]
    kinds = [f["kind"] for f in report["findings"]] + [
        f["kind"] for r in report["ranks"] for f in r["findings"]]
    assert "rank_divergence" not in kinds


HARD_EXIT = """
    import os
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4, num_workers=2)
    for (x,) in data:   # forked workers leave through os._exit too
        loss = model(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("loss", repr(loss.item()), flush=True)
    os._exit(5)
"""


def test_os_exit_still_writes_the_report(tmp_path):
    """``os._exit`` skips every ``finally``: the report was never written."""
    script = runs.write(tmp_path, "hard_exit.py", HARD_EXIT)
    report = tmp_path / "r.json"
    base = runs.plain(script)
    res = runs.under(script, options=("--headless", "--report", str(report)))
    assert base.rc == 5 and base.out.count("loss") == 2, base.err
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    data = json.loads(report.read_text())
    assert data["exit_code"] == 5 and data["steps"] == 2
