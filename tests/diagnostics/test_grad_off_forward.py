"""``unused_parameter`` for a model whose training forward runs with gradients off
(under ``torch.no_grad()`` or ``torch.inference_mode()``) while an optimizer steps its
parameters; silent for frozen teachers, target networks and a GAN's samples."""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _backbone(grad_off: Callable[[], contextlib.AbstractContextManager],
              in_optimizer: bool = True, steps: int = 5) -> FindingSink:
    """``steps`` steps of a head trained on ``features(x)`` computed under ``grad_off``."""
    torch.manual_seed(0)
    features = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
    head = nn.Linear(16, 2)
    params = [*features.parameters(), *head.parameters()] if in_optimizer \
        else list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    w = tensorscope.watch([features, head], opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(steps):
        x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
        with grad_off():
            h = features(x)
        loss = F.cross_entropy(head(h.clone()), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    return sink


def test_backbone_under_no_grad_in_the_optimizer_is_unused_parameter() -> None:
    sink = _backbone(torch.no_grad)
    f = sink.findings[("unused_parameter", "")]
    assert f.severity == "warning" and f.root == 0   # type: ignore[attr-defined]
    assert "gradients off" in f.message and "no_grad" in f.message


def test_backbone_under_inference_mode_is_unused_parameter() -> None:
    """Its forward is an evaluation of its own (the cloned output links it to nothing);
    the training step after it is still checked, with the roots of that evaluation."""
    sink = _backbone(torch.inference_mode)
    assert "gradients off" in sink.findings[("unused_parameter", "")].message


def test_backbone_left_out_of_the_optimizer_is_silent() -> None:
    """A frozen teacher or target network: no optimizer holds it."""
    for grad_off in (torch.no_grad, torch.inference_mode):
        sink = _backbone(grad_off, in_optimizer=False)
        assert "unused_parameter" not in {k for k, _ in sink.findings}


def test_generator_sampled_under_no_grad_for_critic_steps_is_silent() -> None:
    """Five critic steps per generator step (WGAN): the generator's optimizer, known to
    the watch from the start, is not stepped in the critic's steps."""
    torch.manual_seed(0)
    g, d = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), nn.Linear(2, 1)
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.01), torch.optim.SGD(d.parameters(), lr=0.01)
    w = tensorscope.watch([g, d], [opt_g, opt_d], connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(2):
        for _ in range(5):
            with torch.no_grad():
                fake = g(torch.randn(8, 4))
            opt_d.zero_grad()
            (d(fake).mean() - d(torch.randn(8, 2)).mean()).backward()
            opt_d.step()
        opt_g.zero_grad()
        (-d(g(torch.randn(8, 4))).mean()).backward()
        opt_g.step()
    w.close()
    assert "unused_parameter" not in {k for k, _ in sink.findings}
