# MAML with torch.func.functional_call: an inner loop adapts a copy of the
# parameters with torch.autograd.grad(create_graph=True), the outer (meta) loss
# is backpropagated through it, then the meta-optimizer steps. Correct code.
# expect: none
import torch
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 1))
meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for it in range(4):
    meta_opt.zero_grad()
    meta_loss = 0.0
    for task in range(2):
        a, ph = torch.rand(1) * 4 + 1, torch.rand(1) * 3
        xs, xq = torch.rand(10, 1) * 10 - 5, torch.rand(10, 1) * 10 - 5
        ys, yq = a * torch.sin(xs + ph), a * torch.sin(xq + ph)
        params = dict(model.named_parameters())
        for _ in range(2):
            loss = nn.functional.mse_loss(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
            params = {n: p - 0.01 * g for (n, p), g in zip(params.items(), grads)}
        meta_loss = meta_loss + nn.functional.mse_loss(functional_call(model, params, (xq,)), yq)
    (meta_loss / 2).backward()
    meta_opt.step()
