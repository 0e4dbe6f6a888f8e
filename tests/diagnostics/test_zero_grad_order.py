"""``zero_grad_before_step``: gradients cleared between ``backward()`` and ``step()``."""
from __future__ import annotations

import torch
from torch import nn

import tensorscope
from sinks import Log


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def _run(model: nn.Module, opts: list, body) -> set[tuple[str, str]]:
    w = tensorscope.watch(model, opts, connect=False)
    sink = Log()
    w.session.add_sink(sink)
    try:
        for _ in range(4):
            body()
    finally:
        w.close()
    return {k for k in sink.kinds if k[0] != "tiny_updates"}


def test_zero_grad_between_backward_and_step_is_found() -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def body() -> None:
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.zero_grad()
        opt.step()

    assert _run(model, [opt], body) == {("zero_grad_before_step", "")}


def test_zero_grad_in_the_right_places_and_closures_are_not() -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def usual() -> None:
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()

    assert _run(model, [opt], usual) == set()

    lbfgs = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)
    x = torch.randn(8, 4)

    def closure() -> torch.Tensor:
        lbfgs.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    assert _run(model, [lbfgs], lambda: lbfgs.step(closure)) == set()

    gen, disc = _model(), nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1))
    og, od = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())

    def gan() -> None:
        fake = gen(torch.randn(8, 4))
        od.zero_grad()
        disc(fake.detach()).mean().backward()
        od.step()
        og.zero_grad()
        (-disc(fake).mean()).backward()
        og.step()

    assert _run(nn.ModuleList([gen, disc]), [og, od], gan) == set()


def test_zeroing_in_place_between_backward_and_step_is_found() -> None:
    """``zero_grad(set_to_none=False)`` (the optimizer's or the model's) leaves zero
    tensors: the step updates nothing, or only through momentum and weight decay."""
    for zero in ("opt", "model"):
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

        def body() -> None:
            model(torch.randn(8, 4)).pow(2).mean().backward()
            (opt if zero == "opt" else model).zero_grad(set_to_none=False)
            opt.step()

        assert _run(model, [opt], body) == {("zero_grad_before_step", "")}, zero


def test_zeroing_elsewhere_is_not() -> None:
    """Zeroing another network's gradients between a backward and a step, or zeroing
    before a further backward, leaves the step's gradients alone; ``zero_grad`` is put
    back on detach."""
    gen, disc = _model(), nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1))
    og, od = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())

    def gan() -> None:   # pytorch/examples' DCGAN order
        disc.zero_grad()
        fake = gen(torch.randn(8, 4))
        disc(fake.detach()).mean().backward()
        od.step()
        gen.zero_grad(set_to_none=False)
        (-disc(fake).mean()).backward()
        disc.zero_grad(set_to_none=False)   # D's gradients from G's loss: not og's
        og.step()

    assert _run(nn.ModuleList([gen, disc]), [og, od], gan) == set()

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def twice() -> None:   # two passes over one batch (SAM's ascent, then its step)
        x = torch.randn(8, 4)
        model(x).pow(2).mean().backward()
        opt.zero_grad(set_to_none=False)
        model(x).pow(2).mean().backward()
        opt.step()

    assert _run(model, [opt], twice) == set()
    assert not getattr(torch.optim.Optimizer.zero_grad, "__tensorscope_wrapped__", False)
    assert not getattr(nn.Module.zero_grad, "__tensorscope_wrapped__", False)


def test_a_failing_zero_grad_listener_never_breaks_zero_grad(capsys) -> None:
    """A listener that raises is dropped and said once; zero_grad() still zeroes, and the
    original methods are back when no listener is left."""
    from tensorscope.hooks.diagnostics import zeroing

    def broken(obj: object, set_to_none: bool) -> None:
        raise RuntimeError("listener bug")

    model = _model()
    model(torch.randn(2, 4)).sum().backward()
    zeroing.listen(broken)
    try:
        model.zero_grad()
        assert all(p.grad is None for p in model.parameters())
    finally:
        zeroing.unlisten(broken)
    assert "zero_grad() check failed" in capsys.readouterr().err
    assert not getattr(nn.Module.zero_grad, "__tensorscope_wrapped__", False)


def test_autograd_grad_before_the_zero_grad_is_no_backward() -> None:
    """``torch.autograd.grad`` for an input's gradient (a physics-informed residual built
    from a non-leaf input, then ``zero_grad()``, then the loss's backward, with a boundary
    term from a second call) accumulates
    into no parameter: no micro-batch is thrown away."""
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def body() -> None:
        x = torch.rand(16, 4, requires_grad=True) * 3   # not a leaf
        y = model(x)
        dy = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
        opt.zero_grad()
        boundary = model(torch.zeros(1, 4))   # a second root call in the step
        (((dy.sum(1, keepdim=True) + y) ** 2).mean() + boundary.pow(2).mean()).backward()
        opt.step()

    assert _run(model, [opt], body) == set()
