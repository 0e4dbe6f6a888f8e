"""``unscaled_accumulation``: k backwards of an undivided mean loss per step, in-process."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink

KIND = "unscaled_accumulation"


def _train(case: str, steps: int = 3, k: int = 4) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    criterion = nn.CrossEntropyLoss(reduction="sum" if case == "sum_module" else "mean")
    with w:
        for _ in range(steps):
            opt.zero_grad()
            for _ in range(k):
                x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
                if case in ("module", "sum_module"):
                    criterion(model(x), y).backward()
                elif case == "functional":
                    F.cross_entropy(model(x), y).backward()
                elif case == "l1_module":
                    nn.L1Loss()(model(x), F.one_hot(y, 3).float()).backward()
                elif case == "divided":
                    (criterion(model(x), y) / k).backward()
                elif case == "sum_functional":
                    F.cross_entropy(model(x), y, reduction="sum").backward()
                elif case == "zeroed":
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                elif case.startswith("terms"):   # a multi-task loss: two terms
                    out = model(x)
                    ce, mse = criterion(out, y), F.mse_loss(out, F.one_hot(y, 3).float())
                    loss = {"terms": ce + 0.5 * mse, "terms_sub": ce - 0.1 * mse.detach(),
                            "terms_divided": (ce + 0.5 * mse) / k,
                            "terms_each_divided": ce / k + 0.5 * mse / k,
                            "terms_weighted": 0.25 * ce + 0.125 * mse}[case]
                    loss.backward()
            opt.step()
    return {key: f for key, f in sink.findings.items() if key[0] == KIND}


@pytest.mark.parametrize("case", ["module", "functional", "l1_module", "terms", "terms_sub"])
def test_undivided_mean_loss_is_named(case: str) -> None:
    (f,) = _train(case).values()
    assert f.module == "" and f.severity == "warning"
    assert "4 backward() calls" in f.message and "loss / 4" in f.message
    assert "test_unscaled_accumulation.py:" in f.message   # the user's line


@pytest.mark.parametrize("case", ["divided", "sum_module", "sum_functional", "zeroed",
                                  "terms_divided", "terms_each_divided", "terms_weighted"])
def test_silent(case: str) -> None:
    assert not _train(case)


def test_one_backward_per_step_is_silent() -> None:
    assert not _train("module", steps=6, k=1)


def test_two_losses_of_one_forward_are_silent() -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    with w:
        for _ in range(4):
            out = model(torch.randn(5, 6))
            losses = [F.cross_entropy(out, torch.randint(0, 3, (5,))),
                      F.cross_entropy(out, torch.randint(0, 3, (5,)))]
            opt.zero_grad()
            for loss in losses:   # one line, but no new forward between the backwards
                loss.backward(retain_graph=True)
            opt.step()
    assert not [k for k in sink.findings if k[0] == KIND]


def test_backwards_from_two_lines_are_silent() -> None:
    """A DCGAN discriminator step: errD_real.backward(); errD_fake.backward(); step."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 1), nn.Sigmoid())
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w = tensorscope.watch(net, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    bce = nn.BCELoss()
    with w:
        for _ in range(4):
            opt.zero_grad()
            bce(net(torch.randn(5, 6)).view(-1), torch.ones(5)).backward()
            bce(net(torch.randn(5, 6)).view(-1), torch.zeros(5)).backward()
            opt.step()
    assert not [k for k in sink.findings if k[0] == KIND]


def test_closure_backwards_inside_step_are_silent() -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=4)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    x, y = torch.randn(16, 6), torch.randn(16, 1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    with w:
        for _ in range(4):
            opt.step(closure)
    assert not [k for k in sink.findings if k[0] == KIND]
