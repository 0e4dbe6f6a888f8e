"""``watch(model)`` without its optimizer still sees that optimizer's steps."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks_zoo import watch
from tensorscope.common.events import Finding, StepSummary


def _siamese_steps(net: nn.Module, opt: torch.optim.Optimizer, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        a, b = torch.randn(6, 8), torch.randn(6, 8)
        d = F.pairwise_distance(net(a), net(b))   # the same root called twice a step
        loss = d.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_a_model_watched_without_its_optimizer_has_one_step_per_optimizer_step():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    w, log = watch(net)
    with w:
        losses = _siamese_steps(net, opt, 5)
        seen = list(w.optimizers)
    train = [s for s in log.of(StepSummary) if s.kind == "train"]
    # the first iteration, before the optimizer ever stepped, is one step too: the
    # second call of the pair joins the graph of the first
    assert [s.loss for s in train] == losses and len(log.of(StepSummary)) == 5
    assert all(s.calls == 8 for s in train)
    assert seen == [opt]
    # step() was seen: no "SGD.step() was never called"
    assert not [f for f in log.of(Finding) if f.severity in ("warning", "error")]


def test_an_optimizer_of_other_parameters_is_not_taken_and_a_given_one_is_seen_once():
    torch.manual_seed(0)
    net, other = nn.Linear(8, 4), nn.Linear(3, 3)
    opt, other_opt = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(
        other.parameters(), lr=0.1)
    w, log = watch(net, opt)
    with w:
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(2, 8)).sum().backward()
            opt.step()
            other_opt.zero_grad()
            other(torch.randn(2, 3)).sum().backward()
            other_opt.step()
        seen = list(w.optimizers)
    assert seen == [opt]
    assert [s.kind for s in log.of(StepSummary)] == ["train"] * 3
    assert [s.step for s in log.of(StepSummary)] == [0, 1, 2]


def test_detached_the_discovery_hooks_are_gone():
    from torch.optim import optimizer as optimizer_hooks

    before = (len(optimizer_hooks._global_optimizer_pre_hooks),
              len(optimizer_hooks._global_optimizer_post_hooks))
    w, _ = watch(nn.Linear(2, 2))
    w.close()
    assert (len(optimizer_hooks._global_optimizer_pre_hooks),
            len(optimizer_hooks._global_optimizer_post_hooks)) == before


class Decaying(torch.optim.Optimizer):
    """A wrapper optimizer (as ZeroRedundancyOptimizer, Lookahead): its step runs an
    inner optimizer's step, then changes the weights itself."""

    def __init__(self, params) -> None:
        params = list(params)
        super().__init__(params, {})
        self.inner = torch.optim.SGD(params, lr=0.1)

    @torch.no_grad()
    def step(self, closure=None):
        self.inner.step()
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(0.99)   # weight decay of its own


def test_an_optimizer_stepping_inside_another_is_part_of_the_outer_step():
    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    opt = Decaying(net.parameters())
    w, log = watch(net, stats_every=1)
    with w:
        norms = []
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(5, 4)).pow(2).mean().backward()
            opt.step()
            norms.append(float(net.weight.detach().norm()))
        seen = list(w.optimizers)
    train = log.of(StepSummary)
    assert [s.kind for s in train] == ["train"] * 3 and [s.updates for s in train] == [1, 2, 3]
    assert seen == [opt]   # the inner one is the outer's own
    for summary, norm in zip(train, norms):   # taken after the outer step, not the inner
        row = next(p for p in summary.params if p["name"] == "weight")
        assert abs(row["norm"] - norm) < 1e-5 * norm
    assert not [f for f in log.of(Finding) if f.severity in ("warning", "error")]
