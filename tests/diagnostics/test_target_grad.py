"""``target_requires_grad``: a loss's target made by a model with gradients on."""
from __future__ import annotations

import copy
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
IMPORTED_MSE = F.mse_loss   # taken before any watch wraps it: seen only in the graph


def _dqn(loss: Loss, detach: bool, same_net: bool = False) -> FindingSink:
    """Four TD updates of ``q``; the target from a copy of it (or from ``q`` itself)."""
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    target_net = q if same_net else copy.deepcopy(q)
    opt = torch.optim.SGD(q.parameters(), lr=0.01)
    w = tensorscope.watch([q] if same_net else [q, target_net], opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(4):
        s, s2, r = torch.randn(8, 4), torch.randn(8, 4), torch.randn(8)
        nxt = target_net(s2).max(1).values
        y = r + 0.9 * (nxt.detach() if detach else nxt)
        opt.zero_grad()
        loss(q(s)[:, 0], y).backward()
        opt.step()
    w.close()
    return sink


def test_td_target_of_a_target_network_is_named_there() -> None:
    sink = _dqn(F.mse_loss, detach=False)
    assert ("target_requires_grad", "") in sink.findings
    (f,) = [f for k, f in sink.findings.items() if k[0] == "target_requires_grad"]
    assert f.root == 1 and "no optimizer uses" in f.message   # type: ignore[attr-defined]
    # the target network's gradients are this mistake, not a parameter left out
    assert not [k for k in sink.findings if k[0] == "param_not_in_optimizer"]


def test_td_target_of_the_online_network() -> None:
    """A loss module, and the graph-read path (a function the watch did not wrap)."""
    for loss in (nn.SmoothL1Loss(), IMPORTED_MSE):
        sink = _dqn(loss, detach=False, same_net=True)
        found = [f for k, f in sink.findings.items() if k[0] == "target_requires_grad"]
        assert found and "update changes" in found[0].message, loss  # type: ignore[attr-defined]


def test_detached_target_is_silent() -> None:
    for same in (False, True):
        sink = _dqn(F.mse_loss, detach=True, same_net=same)
        assert not [k for k in sink.findings if k[0] == "target_requires_grad"]


def _train(net: nn.Module, extra: list[nn.Module], make: Callable[[], torch.Tensor]) -> set:
    torch.manual_seed(0)
    params = [p for m in (net, *extra) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    w = tensorscope.watch([net, *extra], opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(3):
        opt.zero_grad()
        make().backward()
        opt.step()
    w.close()
    return {k for k in sink.findings if k[0] == "target_requires_grad"}


def test_intended_differentiable_targets_are_silent() -> None:
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    emb = nn.Embedding(3, 4)
    x = torch.randn(16, 6)
    # VICReg's invariance term: two views through one network
    assert not _train(net, [], lambda: F.mse_loss(net(x), net(x * 0.9)))
    # a center loss: the target is a learnable embedding
    assert not _train(net, [emb], lambda: F.mse_loss(net(x), emb(torch.randint(0, 3, (16,)))))
    # the arguments swapped: the prediction is the target side
    assert not _train(net, [], lambda: nn.MSELoss()(torch.randn(16, 4), net(x)))


def test_an_equation_residual_is_silent() -> None:
    """A physics-informed loss: the prediction is a derivative of the very output that
    is the target."""
    u = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def residual() -> torch.Tensor:
        x = torch.rand(32, 1, requires_grad=True)
        y = u(x)
        du = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
        return F.mse_loss(d2u, -y)

    assert not _train(u, [], residual)


def test_teacher_with_gradients_on_is_named() -> None:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    student = nn.Linear(6, 4)
    opt = torch.optim.SGD(student.parameters(), lr=0.01)
    w = tensorscope.watch([student, teacher], opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(3):
        x = torch.randn(8, 6)
        loss = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(student(x), 1),
                                                   F.softmax(teacher(x), 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    found = [f for k, f in sink.findings.items() if k[0] == "target_requires_grad"]
    assert [f.root for f in found] == [1]  # type: ignore[attr-defined]


def test_r_drop_symmetric_kl_is_silent() -> None:
    """R-Drop: the KL between two dropout passes of one model, gradients through both
    on purpose (the target a softmax of the module's output, no data mixed in)."""
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 4))
    x = torch.randn(16, 6)

    def r_drop() -> torch.Tensor:
        p, q = net(x), net(x)
        return 0.5 * (F.kl_div(F.log_softmax(p, -1), F.softmax(q / 2.0, -1), reduction="batchmean")
                      + F.kl_div(F.log_softmax(q, -1), F.softmax(p, -1), reduction="batchmean"))

    assert not _train(net, [], r_drop)


def test_kl_to_one_prior_for_every_sample_is_no_broadcast() -> None:
    """F.kl_div (wrapped while attached, for its target) against a uniform [C] prior
    broadcast over [N, C] is meant; a [N, 1] against [N] still broadcasts wrongly."""
    torch.manual_seed(0)
    net = nn.Linear(6, 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    w = tensorscope.watch(net, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(2):
        logp = F.log_softmax(net(torch.randn(8, 6)), -1)
        loss = F.kl_div(logp, torch.full((4,), 0.25), reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert not [k for k in sink.findings if k[0] == "loss_broadcast"]
    F.kl_div(logp[:, :1], torch.rand(8), reduction="sum")
    w.close()
    assert ("loss_broadcast", "") in sink.findings


def _batched_td(loss: Loss, detach: bool, split: str) -> set:
    """TD updates whose Q(s) and Q(s') come from one forward of ``cat([s, s2])``."""
    q = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))

    def td() -> torch.Tensor:
        s, s2, r = torch.randn(8, 4), torch.randn(8, 4), torch.randn(8)
        a = torch.randint(0, 2, (8,))
        q_all = q(torch.cat([s, s2]))
        q_s, q_s2 = q_all.chunk(2) if split == "chunk" else (q_all[:8], q_all[8:])
        nxt = q_s2.max(1).values
        return loss(q_s.gather(1, a[:, None]).squeeze(1), r + 0.9 * (nxt.detach() if detach
                                                                     else nxt))

    return _train(q, [], td)


def test_td_target_from_the_same_batched_forward_is_named() -> None:
    """One forward for both states: the prediction and the target are different rows of
    one output, so the prediction reaching that output is no equation residual."""
    for loss in (F.smooth_l1_loss, nn.MSELoss(), IMPORTED_MSE):
        for split in ("slice", "chunk"):
            assert _batched_td(loss, detach=False, split=split) == {
                ("target_requires_grad", "")}, (loss, split)
            assert not _batched_td(loss, detach=True, split=split), (loss, split)


def test_rollout_td_target_from_shifted_values_is_named() -> None:
    """A critic over a rollout of T+1 states: ``values[1:]`` in the target, ``values[:-1]``
    the prediction, one forward (A2C without ``.detach()``)."""
    critic = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))

    def rollout(detach: bool) -> torch.Tensor:
        values = critic(torch.randn(11, 3)).squeeze(-1)
        nxt = values[1:].detach() if detach else values[1:]
        return F.mse_loss(values[:-1], torch.randn(10) + 0.95 * nxt)

    assert _train(critic, [], lambda: rollout(False)) == {("target_requires_grad", "")}
    assert not _train(critic, [], lambda: rollout(True))


def test_symmetric_losses_over_one_batched_forward_are_silent() -> None:
    """R-Drop over a duplicated batch and an invariance term over two halves of one
    forward pull both sides on purpose."""
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 4))
    x = torch.randn(8, 6)

    def halves() -> torch.Tensor:
        p, q = net(torch.cat([x, x])).chunk(2)
        z = net(torch.cat([x, x + 0.01]))
        return F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="batchmean") \
            + F.mse_loss(z[:8], z[8:])

    assert not _train(net, [], halves)


def test_a_failing_advantage_check_goes_off_alone(monkeypatch, capsys) -> None:
    """The policy-gradient walk raising switches off that walk only, said once: the
    TD-target check of the same observer still names the target network."""
    from tensorscope.hooks.diagnostics import policy_gradient

    def broken(*_args: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(policy_gradient, "attached_advantages", broken)
    sink = _dqn(F.mse_loss, detach=False)
    assert ("target_requires_grad", "") in sink.findings
    err = capsys.readouterr().err
    assert err.count("the policy-gradient advantage check failed (RuntimeError: injected)") == 1
