"""Detach leaves no trace; no user tensor outlives its step; numbers never change."""
from __future__ import annotations

import copy
import gc
import weakref

import pytest
import torch
import torch.nn.modules.module as module_globals
import torch.optim.optimizer as optimizer_globals
from torch import nn

from hooks_zoo import Classifier, ConvNet, InplaceNet, train_steps, watch
from tensorscope.hooks.watch import Watch

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
              "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_load_state_dict_pre_hooks")
GLOBAL_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                "_global_backward_pre_hooks", "_global_forward_hooks_always_called",
                "_global_forward_hooks_with_kwargs")


def _hook_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict:
    state = {}
    for name, mod in model.named_modules():
        for attr in HOOK_DICTS:
            if hasattr(mod, attr):
                state[(name, attr)] = dict(getattr(mod, attr))
    for attr in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks"):
        state[("opt", attr)] = dict(getattr(opt, attr))
    for attr in GLOBAL_DICTS:
        if hasattr(module_globals, attr):
            state[("global", attr)] = dict(getattr(module_globals, attr))
    for attr in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
        state[("global", attr)] = dict(getattr(optimizer_globals, attr))
    return state


@pytest.mark.parametrize("global_hooks", [False, True])
def test_close_restores_every_hook_dict_and_outputs_are_bit_identical(global_hooks):
    torch.manual_seed(0)
    model = ConvNet().eval()
    twin = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _hook_state(model, opt)
    x = torch.randn(2, 3, 16, 16)
    w = Watch([] if global_hooks else model, opt, connect=False, global_hooks=global_hooks)
    with w:
        model(x)
        assert _hook_state(model, opt) != before
    assert _hook_state(model, opt) == before
    assert torch.equal(model(x), twin(x))
    w.close()  # idempotent


def _step_with_weakrefs(model, opt, refs):
    x = torch.randn(4, 784)
    y = torch.randint(0, 10, (4,))
    refs += [weakref.ref(x), weakref.ref(y)]
    h = model.network[0](x)
    refs.append(weakref.ref(h))
    out = model.network[1:](h)
    refs.append(weakref.ref(out))
    loss = nn.functional.cross_entropy(out, y)
    refs.append(weakref.ref(loss))
    opt.zero_grad()
    loss.backward()
    opt.step()


@pytest.mark.parametrize("mode", ["shapes", "default", "full"])
def test_no_user_tensor_outlives_its_step(mode):
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt, mode=mode)
    refs: list[weakref.ref] = []
    with w:
        for _ in range(2):
            _step_with_weakrefs(model, opt, refs)
        gc.collect()
        alive = [r for r in refs if r() is not None]
        assert not alive, f"{len(alive)} user tensors kept alive by an open watch"
    assert len(log.summaries()) == 2


def test_no_tensor_or_model_kept_after_close():
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, _ = watch(model, opt)
    with w:
        train_steps(model, opt, [(torch.randn(2, 784), torch.randint(0, 10, (2,)))])
    mref, pref = weakref.ref(model), weakref.ref(model.network[0].weight)
    del model, opt
    gc.collect()
    assert mref() is None and pref() is None
    assert w.index.roots == [] and w.capture.step.calls == []


def test_inference_activations_are_freed_during_the_forward():
    keep: list[weakref.ref] = []

    class Spy(nn.Module):
        def forward(self, x):
            keep.append(weakref.ref(x))
            return x * 2

    model = nn.Sequential(nn.Linear(3, 3), Spy(), Spy())
    w, _ = watch(model)
    with w, torch.no_grad():
        model(torch.randn(2, 3))
        gc.collect()
        assert all(r() is None for r in keep)


@pytest.mark.parametrize("mode", ["shapes", "default", "full"])
def test_transparency_same_losses_params_and_rng(mode):
    batches = [(torch.randn(6, 3, 16, 16), torch.randint(0, 5, (6,))) for _ in range(3)]

    def run(instrument: bool):
        torch.manual_seed(1)
        model = ConvNet()  # dropout consumes the global RNG: any extra draw would show
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        if instrument:
            w, _ = watch(model, opt, mode=mode, stats_every=2)
            with w:
                losses = train_steps(model, opt, batches)
        else:
            losses = train_steps(model, opt, batches)
        return losses, [p.detach().clone() for p in model.parameters()], torch.get_rng_state()

    plain, inst = run(False), run(True)
    assert plain[0] == inst[0]
    assert all(torch.equal(a, b) for a, b in zip(plain[1], inst[1]))
    assert torch.equal(plain[2], inst[2])
    assert torch.is_grad_enabled()


def test_inplace_relu_transparent_in_backward():
    torch.manual_seed(0)
    a, b = InplaceNet(), InplaceNet()
    b.load_state_dict(a.state_dict())
    x = torch.randn(5, 4)
    a(x).sum().backward()
    w, _ = watch(b)
    with w:
        b(x).sum().backward()
        w.step()
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(a.parameters(), b.parameters()))


def test_bad_arguments_leave_nothing_attached():
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _hook_state(model, opt)
    with pytest.raises(ValueError, match="unknown --break-on kind 'nan'"):
        Watch(model, opt, connect=False, break_on="nan")
    with pytest.raises(TypeError, match="nn.Module"):
        Watch([model, "not a module"], opt, connect=False)
    with pytest.raises(ValueError, match="mode must be one of"):
        Watch(model, opt, connect=False, mode="everything")
    assert _hook_state(model, opt) == before
