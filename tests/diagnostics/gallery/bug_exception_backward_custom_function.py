# MISTAKE: a custom autograd.Function whose backward returns a gradient of the
# wrong shape (it forgot to expand the reduced gradient): loss.backward() raises
# "Function ClampGradBackward returned an invalid gradient". FIX: return one
# gradient per input, shaped like that input.
# expect: exception "act"
import torch
from torch import nn


class ClampGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        return grad.sum(0)


class Act(nn.Module):
    def forward(self, x):
        return ClampGrad.apply(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.act = Act()
        self.fc2 = nn.Linear(12, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(2):
    opt.zero_grad()
    loss = (model(torch.randn(5, 6)).squeeze(1) - torch.randn(5)).pow(2).mean()
    loss.backward()
    opt.step()
