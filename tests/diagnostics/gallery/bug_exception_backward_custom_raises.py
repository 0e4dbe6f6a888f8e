# MISTAKE: a custom autograd.Function's backward raises (it indexes ctx's saved
# tensors wrongly). FIX: the Function's backward.
# expect: exception "encoder.quant"
import torch
from torch import nn


class StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        x, scale = ctx.saved_tensors
        return grad * scale


class Quant(nn.Module):
    def forward(self, x):
        return StraightThrough.apply(x)


torch.manual_seed(0)
model = nn.Sequential()
model.add_module("encoder", nn.Sequential())
model.encoder.add_module("fc", nn.Linear(4, 8))
model.encoder.add_module("quant", Quant())
model.add_module("head", nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
opt.zero_grad()
model(torch.randn(3, 4)).mean().backward()
opt.step()
