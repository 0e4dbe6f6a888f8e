# MISTAKE: a module backward hook (gradient logging) indexes grad_output wrongly
# and raises during loss.backward(). FIX: the hook.
# expect: exception "body.1"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential()
model.add_module("body", nn.Sequential(nn.Linear(5, 10), nn.Tanh(), nn.Linear(10, 10)))
model.add_module("head", nn.Linear(10, 2))
norms = []
model.body[1].register_full_backward_hook(lambda m, gi, go: norms.append(go[1].norm()))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.zero_grad()
nn.functional.cross_entropy(model(torch.randn(4, 5)), torch.tensor([0, 1, 0, 1])).backward()
opt.step()
