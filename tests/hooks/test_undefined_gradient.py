"""An output whose gradient autograd leaves undefined (a multi-output node the loss
uses only part of, as behind DDP's output sink with find_unused_parameters): the
gradient hook receives None, which is no gradient, not a failure."""
from __future__ import annotations

import torch
from torch import nn

from hooks_zoo import watch
from tensorscope.common.events import Finding


class Two(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)   # unused outputs' gradients stay undefined
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        g = torch.zeros(())
        if ga is not None:
            g = g + 2 * ga
        if gb is not None:
            g = g + 3 * gb
        return g


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return Two.apply(self.fc(x))


def test_an_undefined_output_gradient_is_no_internal_error():
    torch.manual_seed(0)
    model = Head()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    with w:
        for _ in range(3):
            a, _b = model(torch.randn(2, 4))
            loss = a.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert not [f for f in log.of(Finding) if f.kind == "internal_error"]
    heads = [c for c in log.digests() if c.path == ""]
    assert len(heads) == 3 and all(c.grad_norm is not None and c.grad_norm > 0 for c in heads)
    assert all(c.grad_finite for c in heads)
