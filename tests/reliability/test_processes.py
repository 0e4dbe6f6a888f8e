"""Item 3 and 4 of the hardening issue: forked children, spawned children, other threads,
SIGTERM and SIGHUP. Each runs a real script, plainly and under ``tensorscope run``, in
subprocesses bounded in time."""
from __future__ import annotations

import json
import select
import signal
import time

import pytest

import reliability_runs as runs
from tensorscope.viewer.reader import SessionReader

pytestmark = pytest.mark.slow

FORK = """
    import os, sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train(n):
        for _ in range(n):
            loss = model(torch.ones(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss.item()

    train(2)
    pid = os.fork()
    if pid == 0:
        print("child", round(train(300), 6), flush=True)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    print("parent", round(train(3), 6), os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_that_trains_with_record_neither_hangs_nor_writes(tmp_path):
    script = runs.write(tmp_path, "fork_train.py", FORK)
    base = runs.plain(script, limit=60)
    rec, report = tmp_path / "run.tscope", tmp_path / "r.json"
    res = runs.under(script, options=("--headless", "--record", str(rec), "--report",
                                      str(report)), limit=60)
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert res.err.count("was forked from") == 1, res.err
    assert "training waits" not in res.err
    assert json.loads(report.read_text())["steps"] == 5   # the parent's steps only
    with SessionReader(str(rec)) as reader:
        byes = [m for m in reader.messages() if m.TYPE == "bye"]
    assert len(byes) == 1


DATALOADER = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(data, batch_size=8, num_workers=2,
                        multiprocessing_context="fork")
    for epoch in range(2):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("epoch", epoch, round(loss.item(), 5))
"""


def test_dataloader_workers_are_forked_silently(tmp_path):
    script = runs.write(tmp_path, "loader.py", DATALOADER)
    base = runs.plain(script, limit=90)
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")),
                     limit=90)
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert "forked" not in res.err and "internal error" not in res.err, res.err
    assert json.loads((tmp_path / "r.json").read_text())["steps"] == 8


SPAWNED_LOADER = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    def main():
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        loader = DataLoader(data, batch_size=8, num_workers=2, multiprocessing_context="spawn")
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("loss", round(loss.item(), 6))

    if __name__ == "__main__":
        main()
"""


def test_dataloader_workers_started_by_spawn_are_not_called_untrained_children(tmp_path):
    """A DataLoader worker loads data; only a spawned child that may train is noted."""
    script = runs.write(tmp_path, "spawn_loader.py", SPAWNED_LOADER)
    base = runs.plain(script, limit=120)
    res = runs.under(script, options=("--headless", "--report", str(tmp_path / "r.json")),
                     limit=120)
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert "spawn method" not in res.err and "internal error" not in res.err, res.err
    assert json.loads((tmp_path / "r.json").read_text())["steps"] == 4


THREADS = """
    import threading
    import torch
    from torch import nn

    torch.manual_seed(0)
    main = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4)))
    side = [nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 2))) for _ in range(4)]
    opt = torch.optim.SGD(main.parameters(), lr=0.01)
    stop = threading.Event()
    started = threading.Barrier(5)

    def work(m):
        started.wait()
        with torch.no_grad():
            while not stop.is_set():
                m(torch.ones(3, 8))   # no draw from the shared generator

    threads = [threading.Thread(target=work, args=(m,)) for m in side]
    for t in threads:
        t.start()
    started.wait()
    for step in range(25):
        loss = main(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    stop.set()
    for t in threads:
        t.join()
    print("trained", round(loss.item(), 6))
"""


def _paths(node, out):
    out.append(node["path"])
    for child in node.get("modules", []):
        _paths(child, out)
    return out


def test_forwards_on_other_threads_never_corrupt_the_training_threads_records(tmp_path):
    script = runs.write(tmp_path, "threads.py", THREADS)
    base = runs.plain(script, limit=90)
    report = tmp_path / "r.json"
    res = runs.under(script, options=("--headless", "--report", str(report)), limit=90)
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    data = json.loads(report.read_text())
    assert [(r["name"], r["calls"]) for r in data["roots"]] == [("Sequential", 25)]
    paths = [p for root in data["roots"] for p in _paths(root, [])]
    assert not [p for p in paths if "~" in p], paths   # no phantom paths
    assert sorted(paths) == ["", "0", "1", "2", "2.0"]
    assert res.err.count("are not captured") == 1, res.err


SPAWN = """
    import multiprocessing as mp
    import torch
    from torch import nn

    def train(q):
        torch.manual_seed(1)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(20):
            loss = model(torch.ones(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        q.put(round(loss.item(), 6))

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        workers = [ctx.Process(target=train, args=(q,)) for _ in range(2)]
        for w in workers:
            w.start()
        results = sorted(q.get() for _ in workers)
        for w in workers:
            w.join()
        print("workers", results, [w.exitcode for w in workers])
"""


def test_spawned_trainers_are_never_silent(tmp_path):
    script = runs.write(tmp_path, "spawn_train.py", SPAWN)
    base = runs.plain(script, limit=120)
    res = runs.under(script, options=("--headless",), limit=120)
    assert (res.rc, res.out) == (base.rc, base.out), res.err
    assert res.err.count("started with the spawn method") == 1, res.err


FOREVER = """
    import sys, time
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while True:
        loss = model(torch.ones(3, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == 3:
            print("ready", flush=True)
        time.sleep(0.01)
"""


def _until_ready(proc, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready and proc.stdout.readline().strip() == "ready":
            return
        assert proc.poll() is None, proc.stderr.read()
    raise AssertionError("the script never got going")


def _stopped(proc, signum: int) -> tuple[int, str]:
    _until_ready(proc)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=60)
    except Exception:
        proc.kill()
        raise
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_writes_the_report_and_closes_the_recording(tmp_path, signum):
    script = runs.write(tmp_path, "forever.py", FOREVER)
    import subprocess
    import sys

    plain = subprocess.Popen([sys.executable, str(script)], env=runs.env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base_rc, _ = _stopped(plain, signum)
    assert base_rc == -signum
    rec, report = tmp_path / "run.tscope", tmp_path / "r.json"
    proc = runs.start(script, options=("--headless", "--record", str(rec), "--report",
                                       str(report)))
    rc, err = _stopped(proc, signum)
    assert rc == base_rc, err
    data = json.loads(report.read_text())
    assert data["exit_code"] == 128 + signum and data["steps"] >= 3
    with SessionReader(str(rec)) as reader:
        byes = [m for m in reader.messages() if m.TYPE == "bye"]
    assert [b.exit_code for b in byes] == [128 + signum]
