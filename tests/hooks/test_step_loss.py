"""The step's loss is the loss of the gradients its optimizer step uses: the sum of
what ``backward()`` was called on since the gradients were last cleared."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from hooks_zoo import watch


def _train_losses(log) -> list[float]:
    return [s.loss for s in log.summaries() if s.kind == "train"]


def test_gradient_accumulation_reports_the_loss_of_the_whole_batch():
    """nanoGPT's loop: ``(loss / k).backward()`` on k micro-batches, then one step.
    The step's loss was the last micro-batch's ``loss / k`` (1.04 where the script
    printed 4.15)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    k, expected = 4, []
    w, log = watch([model, loss_fn], opt)
    with w:
        for _ in range(3):
            total = 0.0
            for _ in range(k):
                x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
                loss = loss_fn(model(x), y) / k
                loss.backward()
                total += loss.item()
            opt.step()
            opt.zero_grad(set_to_none=True)
            expected.append(total)
    assert _train_losses(log) == pytest.approx(expected, rel=1e-6)


def test_two_backwards_of_one_update_add_up():
    """DCGAN's discriminator: ``errD_real.backward(); errD_fake.backward()``, then
    its step: the step's loss is ``errD_real + errD_fake``, as the script prints."""
    torch.manual_seed(0)
    disc = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt = torch.optim.SGD(disc.parameters(), lr=0.01)
    bce = nn.BCEWithLogitsLoss()
    expected = []
    w, log = watch([disc, bce], opt)
    with w:
        for _ in range(3):
            disc.zero_grad()
            real = bce(disc(torch.randn(5, 4) + 2), torch.ones(5, 1))
            real.backward()
            fake = bce(disc(torch.randn(5, 4) - 2), torch.zeros(5, 1))
            fake.backward()
            opt.step()
            expected.append(real.item() + fake.item())
    assert _train_losses(log) == pytest.approx(expected, rel=1e-6)


def test_a_zero_grad_between_backwards_keeps_the_last_loss():
    """SAM's two passes: the first pass's gradients are cleared before the second
    backward, so its loss is no part of the step's."""
    torch.manual_seed(0)
    model = nn.Linear(5, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(6, 5), torch.randn(6, 1)
    expected = []
    w, log = watch([model], opt)
    with w:
        for _ in range(3):
            opt.zero_grad()
            first = ((model(x) - y) ** 2).mean()
            first.backward()
            opt.zero_grad()
            second = ((model(x) - y) ** 2).mean() * 2
            second.backward()
            opt.step()
            expected.append(second.item())
    assert _train_losses(log) == pytest.approx(expected, rel=1e-6)


def test_a_closure_reports_its_last_evaluation_and_steps_stay_apart():
    """An L-BFGS step evaluates its closure several times: those losses are not
    summed (each evaluation clears the gradients, and they run inside the step);
    nor is a step's loss carried into the next step's."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    seen: list[list[float]] = []
    w, log = watch([model], opt)
    with w:
        for _ in range(3):
            evaluations: list[float] = []

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                evaluations.append(loss.item())
                return loss

            opt.step(closure)
            seen.append(evaluations)
    assert _train_losses(log) == pytest.approx([e[-1] for e in seen], rel=1e-6)
