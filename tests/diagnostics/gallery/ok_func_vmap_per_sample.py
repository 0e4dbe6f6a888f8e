# torch.func: functional_call + vmap per-sample gradients, then a normal step with them; jacrev
# expect: none
import torch
from torch import nn
from torch.func import functional_call, vmap, grad
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
params = {k: v.detach() for k, v in model.named_parameters()}
def loss_fn(p, x, y):
    out = functional_call(model, p, (x.unsqueeze(0),)); return ((out.squeeze() - y) ** 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(10, 5); y = torch.randn(10)
    psg = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    for k, p in model.named_parameters():
        p.grad = psg[k].clamp(-1, 1).mean(0)
    opt.step(); params = {k: v.detach() for k, v in model.named_parameters()}
    with torch.no_grad():
        print(f"step {step} loss {((model(x).squeeze() - y) ** 2).mean().item():.6f}")
# also ordinary autograd training after vmap
opt.zero_grad(); l = ((model(x).squeeze() - y) ** 2).mean(); l.backward(); opt.step(); print(f"final {l.item():.6f}")
