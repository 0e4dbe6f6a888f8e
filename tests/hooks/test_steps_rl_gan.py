"""Step boundaries of hand-written reinforcement learning and GAN loops: one
training step per update, the forwards without gradients that begin each
iteration included (``Capture._begins_iteration``, ``hooks.lead_in``), while
evaluations and samples between updates stay inference steps of their own."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from hooks_zoo import EventLog, watch
from tensorscope.hooks.watch import Watch


def _global_watch() -> tuple[Watch, EventLog]:
    """A watch as ``tensorscope run`` makes it: roots and optimizers found as they run."""
    w = Watch([], None, connect=False, global_hooks=True)
    log = EventLog()
    w.session.add_sink(log)
    return w, log


def _steps(log: EventLog) -> list[tuple[str, int]]:
    return [(s.kind, s.calls) for s in log.summaries()]


def _dqn_update(policy: nn.Module, target: nn.Module, opt: torch.optim.Optimizer,
                variant: str) -> None:
    """One DQN update on a replay batch; ``variant`` says where the forwards under
    ``no_grad`` run (the target network's, or the policy's own for double DQN)."""
    s, s2 = torch.randn(8, 4), torch.randn(8, 4)
    a, r = torch.randint(0, 2, (8, 1)), torch.randn(8)
    if variant in ("target_before", "double_before"):
        with torch.no_grad():
            if variant == "double_before":
                best = policy(s2).argmax(1, keepdim=True)
                want = r + 0.99 * target(s2).gather(1, best).squeeze(1)
            else:
                want = r + 0.99 * target(s2).max(1).values
    q = policy(s).gather(1, a).squeeze(1)
    if variant in ("target_after", "double_after"):
        with torch.no_grad():
            if variant == "double_after":
                best = policy(s2).argmax(1, keepdim=True)
                want = r + 0.99 * target(s2).gather(1, best).squeeze(1)
            else:
                want = r + 0.99 * target(s2).max(1).values
    loss = nn.SmoothL1Loss()(q, want)
    opt.zero_grad()
    loss.backward()
    opt.step()


def _nets() -> tuple[nn.Module, nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    return policy, copy.deepcopy(policy), torch.optim.Adam(policy.parameters(), lr=1e-3)


# calls per update: the policy (3 modules and itself) once or twice, the target
# network (4) and the loss module (1)
_T9, _T13 = ("train", 9), ("train", 13)
# double DQN before the training forward: the first update has no earlier one to
# repeat, and its selection forward stays an inference step
_DQN = [("target_before", [_T9] * 3), ("target_after", [_T9] * 3),
        ("double_before", [("inference", 8), ("train", 5), _T13, _T13]),
        ("double_after", [_T13] * 3)]


@pytest.mark.parametrize("variant,steps", _DQN, ids=[v for v, _ in _DQN])
def test_a_dqn_update_is_one_training_step_under_run(variant: str, steps: list) -> None:
    """Double DQN selects the next actions with the policy itself under ``no_grad``:
    before the training forward, that forward was an inference step of its own at
    every update; after it, the first update (no optimizer known yet) was cut into
    two inference steps and a training step of no call."""
    policy, target, opt = _nets()
    w, log = _global_watch()
    with w:
        for _ in range(3):
            _dqn_update(policy, target, opt, variant)
    assert _steps(log) == steps


@pytest.mark.parametrize("variant,steps", _DQN, ids=[v for v, _ in _DQN])
def test_a_dqn_update_is_one_training_step_under_watch(variant: str, steps: list) -> None:
    policy, target, opt = _nets()
    w, log = watch([policy, target], opt)
    with w:
        for _ in range(3):
            _dqn_update(policy, target, opt, variant)
    first = [("inference", 8), ("train", 5)] if variant == "double_before" else steps[:1]
    assert _steps(log) == first + steps[-1:] * 2
    w2, log2 = watch(policy, opt)   # the target network not watched: the policy's calls
    with w2:
        for _ in range(3):
            _dqn_update(policy, target, opt, variant)
    assert [s.kind for s in log2.summaries()][-2:] == ["train"] * 2


def test_acting_then_learning_at_every_move_is_one_step_per_move() -> None:
    """The PyTorch DQN tutorial's loop: the policy picks each move under
    ``no_grad``, then one update on a replay batch. Before the replay memory
    fills, each move is an inference step; the first two updates' moves stay
    apart (the first has no update before it to repeat, the second follows one
    that came after three moves); then a move and its update are one step."""
    policy, target, opt = _nets()
    w, log = _global_watch()
    with w:
        for move in range(7):
            with torch.no_grad():
                policy(torch.randn(1, 4)).argmax(1)
            if move >= 2:
                _dqn_update(policy, target, opt, "target_after")
    i4 = ("inference", 4)
    assert _steps(log) == [i4] * 3 + [_T9, i4, _T9] + [_T13] * 3


def test_acting_and_double_dqn_selection_before_the_update_are_one_step() -> None:
    """Each move's action, then the next states' actions, both chosen by the policy
    under ``no_grad`` before its training forward: from the third update on, the
    move is one step (two policy forwards under ``no_grad`` in a row used to cut
    it into two inference steps and a training step at every move)."""
    policy, target, opt = _nets()
    w, log = _global_watch()
    with w:
        for move in range(6):
            with torch.no_grad():
                policy(torch.randn(1, 4)).argmax(1)
            if move >= 1:
                _dqn_update(policy, target, opt, "double_before")
    steps = _steps(log)
    assert steps[-3:] == [("train", 17)] * 3, steps
    assert [k for k, _ in steps].count("train") == 5


def test_an_evaluation_before_training_the_same_model_stays_apart() -> None:
    """The rule that keeps a DQN's no-grad forwards in its step leaves evaluations
    alone: a loop of batches under ``no_grad``, one batch in eval mode, or the
    batch just trained on, right before the model's next training forward, is not
    part of that step."""
    policy, _, opt = _nets()
    w, log = _global_watch()

    def train(look: bool = False) -> None:
        x = torch.randn(8, 4)
        loss = policy(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if look:   # the loss after the update, on the same batch
            with torch.no_grad():
                policy(x).pow(2).mean().item()

    def evaluate() -> None:
        with torch.no_grad():
            policy(torch.randn(8, 4)).sum().item()

    with w:
        train()
        for _ in range(2):
            evaluate()
        train()
        policy.eval()
        evaluate()
        policy.train()
        for _ in range(4):
            train(look=True)
    step, look = ("train", 4), ("inference", 4)
    assert _steps(log) == [step, look, look, step, look] + [step, look] * 4


def test_fixed_noise_samples_every_few_iterations_stay_inference_steps() -> None:
    """A GAN whose iteration begins with the generator's forward, sampling the
    fixed noise under ``no_grad`` in training mode after every other iteration:
    each sample is an inference step, not part of the next iteration."""
    torch.manual_seed(0)
    gen, disc = nn.Sequential(nn.Linear(2, 4), nn.Tanh()), nn.Sequential(nn.Linear(4, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    fixed = torch.randn(5, 2)
    w, log = _global_watch()
    with w:
        for i in range(8):
            fake = gen(torch.randn(3, 2))
            loss_d = disc(torch.randn(3, 4)).mean() - disc(fake.detach()).mean()
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            loss_g = disc(fake).mean()
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
            if i % 2:
                with torch.no_grad():
                    gen(fixed)
    kinds = [k for k, _ in _steps(log)]
    assert kinds.count("inference") == 4 and kinds[-1] == "inference", _steps(log)


@pytest.mark.parametrize("fixed", [False, True], ids=["new_batch", "fixed_tensor"])
def test_a_one_batch_validation_in_training_mode_stays_an_inference_step(fixed: bool) -> None:
    """Validation of one batch under ``no_grad`` without ``model.eval()`` after every
    epoch: an inference step each time, with its loss, whether the epochs train on
    several batches (its loss module computed a loss) or on one, validated on one
    tensor (full-batch training) that no update takes."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    x_val = torch.randn(6, 4)
    w, log = _global_watch()
    with w:
        for _ in range(4):
            for _ in range(1 if fixed else 2):
                loss = crit(model(torch.randn(6, 4)), torch.randint(0, 3, (6,)))
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                if fixed:
                    model(x_val).argmax(1)
                else:
                    crit(model(torch.randn(6, 4)), torch.randint(0, 3, (6,))).item()
    val = ("inference", 4 if fixed else 5)
    train = [("train", 5)] * (1 if fixed else 2)
    assert _steps(log) == (train + [val]) * 4
