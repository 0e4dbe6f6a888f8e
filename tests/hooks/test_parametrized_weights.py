"""Parametrized weights (``weight_norm``, ``spectral_norm``, ``orthogonal``) read
outside any forward, by a model's ``__init__`` (transformers' Wav2Vec2 family)
or a log line between steps, are neither roots nor steps; read inside a
forward they are that forward's calls."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import orthogonal, spectral_norm, weight_norm

from hooks_zoo import EventLog, watch
from tensorscope.common.events import Finding, ModuleTree
from tensorscope.hooks.watch import Watch


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = weight_norm(nn.Conv1d(2, 4, 3, padding=1))
        self.l = spectral_norm(nn.Linear(4 * 8, 8))
        self.o = orthogonal(nn.Linear(8, 8))
        with torch.no_grad():   # an init that reads the parametrized weight
            self.c.weight.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o(F.relu(self.l(F.relu(self.c(x)).flatten(1))))


def _train(net: Net, opt: torch.optim.Optimizer) -> None:
    for _ in range(3):
        loss = net(torch.randn(4, 2, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        w = net.o.weight   # a log line: how orthogonal it stays, with gradients on
        (w @ w.T - torch.eye(8)).abs().max().item()
        net.l.weight.norm().item()


def _check(log: EventLog) -> None:
    assert [s.kind for s in log.summaries()] == ["train"] * 3
    assert {d.path for d in log.digests()} >= {"c.parametrizations.weight",
                                               "l.parametrizations.weight.0"}
    assert [f.kind for f in log.of(Finding) if f.severity != "info"] == []


def test_reads_outside_forward_are_no_steps_under_run() -> None:
    torch.manual_seed(0)
    w = Watch([], None, connect=False, global_hooks=True)
    log = EventLog()
    w.session.add_sink(log)
    with w:
        net = Net()
        _train(net, torch.optim.Adam(net.parameters(), lr=1e-2))
    _check(log)
    assert [r["type"] for r in log.of(ModuleTree)[-1].roots] == ["Net"]


def test_reads_outside_forward_are_no_steps_under_watch() -> None:
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    w, log = watch(net, opt)
    with w:
        _train(net, opt)
    _check(log)
