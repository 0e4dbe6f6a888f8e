"""Parameters stood in for by ``torch.func.functional_call`` (MAML's fast weights):
never read as the module's parameters, never a ``.grad`` read of a non-leaf."""
from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.func import functional_call

import tensorscope


def _maml(model: nn.Module, opt: torch.optim.Optimizer, iterations: int) -> None:
    for _ in range(iterations):
        opt.zero_grad()
        for _task in range(3):
            x, y = torch.randn(6, 1), torch.randn(6, 1)
            params = dict(model.named_parameters())
            inner = nn.functional.mse_loss(functional_call(model, params, (x,)), y)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            fast = {k: v - 0.01 * g for (k, v), g in zip(params.items(), grads)}
            nn.functional.mse_loss(functional_call(model, fast, (x,)), y).backward()
        opt.step()


def test_fast_weights_are_not_taken_for_the_modules_parameters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    rows: list[list[dict]] = []
    findings: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # reading a non-leaf's .grad warns
        with tensorscope.watch(model, opt, connect=False, stats_every=1) as w:
            w.session.add_sink(_Rows(rows, findings))
            _maml(model, opt, 4)
    named = {r["name"] for step in rows for r in step}
    assert named == {"0.weight", "0.bias", "2.weight", "2.bias"}
    # the meta step's gradients are the real parameters' own
    assert any(r["grad_norm"] for step in rows for r in step)
    assert not w.index.stale
    assert [f.kind for f in findings if f.severity in ("warning", "error")] == []


class _Rows:
    def __init__(self, out: list, findings: list) -> None:
        self.out = out
        self.findings = findings

    def handle(self, msg) -> None:
        if msg.TYPE == "step_summary" and msg.params:
            self.out.append(msg.params)
        elif msg.TYPE == "finding":
            self.findings.append(msg)

    def close(self) -> None:
        pass
