"""``eval_mode_in_training`` names only models the optimizer that stepped trains."""
from __future__ import annotations

import torch
from torch import nn

from tensorscope.common.events import Finding
from tensorscope.hooks.watch import Watch
from sinks import FindingSink


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 2))


def _run(forget_train: bool) -> list[Finding]:
    torch.manual_seed(0)
    scorer, model = _mlp().eval(), _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = Watch([], None, connect=False, global_hooks=True)
    sink = FindingSink()
    w.session.add_sink(sink)
    with w:
        for _ in range(3):
            scorer(torch.randn(2, 4))   # another model's eval-mode forward, gradients on
            if forget_train:
                model.eval()
            loss = model(torch.randn(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in sink.findings.values() if f.kind == "eval_mode_in_training"]


def test_another_models_eval_forward_in_the_step_is_not_training():
    assert _run(forget_train=False) == []


def test_the_trained_model_left_in_eval_mode_is_still_named():
    found = _run(forget_train=True)
    assert found and {f.root for f in found} == {1}
