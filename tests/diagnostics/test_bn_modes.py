"""Dropout/BatchNorm modes that look wrong but are deliberate, and the slips beside
them: BatchNorm statistics re-estimated under ``no_grad`` (``train_mode_in_eval``)
and BatchNorm frozen during fine-tuning (``eval_mode_in_training``)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def _kinds(sink: FindingSink, kind: str) -> set[str]:
    return {k[1] for k in sink.findings if k[0] == kind}


@pytest.mark.parametrize("how,found", [
    ("reset", set()),        # AdaBN: reset, then forwards on the target data
    ("momentum1", set()),    # precise BatchNorm: each forward replaces the statistics
    ("none", {"1"}),         # an evaluation that forgot model.eval()
])
def test_statistics_reestimated_on_purpose_are_not_an_evaluation(how: str, found: set) -> None:
    torch.manual_seed(0)
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(4):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
        opt.step()
    bn = model[1]
    if how == "reset":
        bn.reset_running_stats()
    elif how == "momentum1":
        bn.momentum = 1.0
    with torch.no_grad():
        outs = [model(torch.randn(16, 8) * 2 + 1) for _ in range(3)]
    w.close()
    assert len(outs) == 3
    assert _kinds(sink, "train_mode_in_eval") == found


class Segmenter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Wrapper(nn.Module):
    """One module inside, as DDP's ``module``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


@pytest.mark.parametrize("how,found", [
    ("freeze_bn", set()),                           # model.train(); every BatchNorm .eval()
    ("eval_left_on", {"features.1", "features.4"}),  # model.eval() never undone
    ("wrapped_module_eval", {"module.features.1", "module.features.4"}),   # ddp.module.eval()
])
def test_batchnorm_frozen_for_fine_tuning_is_not_a_forgotten_train(how: str, found: set) -> None:
    torch.manual_seed(0)
    net = Segmenter()
    model: nn.Module = Wrapper(net) if how == "wrapped_module_eval" else net
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for step in range(4):
        if how == "freeze_bn":
            model.train()
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
        elif step == 1:
            (net if how == "wrapped_module_eval" else model).eval()
        loss = F.cross_entropy(model(torch.randn(2, 3, 8, 8)), torch.randint(0, 3, (2, 8, 8)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert _kinds(sink, "eval_mode_in_training") == found


def _gen() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))


@pytest.mark.parametrize("case,found", [
    ("wgan_critic_fakes", set()),   # n_critic no_grad draws of G, each feeding D's step
    ("mixmatch_guesses", set()),    # K=2 no_grad label guesses feeding this step's loss
    ("prediction_loop", {"1"}),     # a loop of no_grad forwards after training: evaluation
])
def test_no_grad_forwards_that_feed_training_are_not_an_evaluation(case: str,
                                                                  found: set) -> None:
    torch.manual_seed(0)
    g, d = _gen(), nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(g.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(d.parameters(), lr=1e-3)
    w = tensorscope.watch([g, d], [opt_g, opt_d], connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(4):
        if case == "wgan_critic_fakes":
            for _ in range(5):
                with torch.no_grad():
                    fake = g(torch.randn(16, 4))
                loss_d = d(fake).mean() - d(torch.randn(16, 2)).mean()
                opt_d.zero_grad()
                loss_d.backward()
                opt_d.step()
            loss_g = -d(g(torch.randn(16, 4))).mean()
        else:
            x = torch.randn(16, 4)
            with torch.no_grad():
                guess = (g(x + 0.1).softmax(1) + g(x - 0.1).softmax(1)) / 2
            loss_g = -(guess * g(x).log_softmax(1)).sum(1).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    if case == "prediction_loop":
        with torch.no_grad():
            preds = [g(torch.randn(16, 4)).argmax(1) for _ in range(3)]
        assert len(preds) == 3
    w.close()
    assert _kinds(sink, "train_mode_in_eval") == found
