# CORRECT: MAML with torch.func.functional_call: each task adapts fast weights
# (autograd.grad with create_graph=True), and the query losses of the meta-batch are
# summed by one backward per task before the meta step: the sum over tasks is the
# MAML objective, not undivided gradient accumulation.
# expect: none
import torch
from torch import nn
from torch.func import functional_call
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 1))
meta = torch.optim.Adam(net.parameters(), 1e-3)
for it in range(15):
    meta.zero_grad(); total = 0.0
    for task in range(4):
        a, ph = torch.rand(1) * 4 + 1, torch.rand(1) * 3
        xs, xq = torch.rand(10, 1) * 10 - 5, torch.rand(10, 1) * 10 - 5
        ys, yq = a * torch.sin(xs + ph), a * torch.sin(xq + ph)
        params = dict(net.named_parameters())
        l = nn.functional.mse_loss(functional_call(net, params, (xs,)), ys)
        grads = torch.autograd.grad(l, list(params.values()), create_graph=True)
        fast = {k: v - 0.01 * g for (k, v), g in zip(params.items(), grads)}
        lq = nn.functional.mse_loss(functional_call(net, fast, (xq,)), yq)
        lq.backward(); total += lq.item()
    meta.step()
print(round(total, 4))
