# CORRECT: ddpm_ema in the usual style (tiny sizes, random data).
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.t = nn.Embedding(100, 32); self.f = nn.Sequential(nn.Linear(2 + 32, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 2))
    def forward(self, x, t): return self.f(torch.cat([x, self.t(t)], -1))
net = Net(); ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(0.999))
opt = torch.optim.AdamW(net.parameters(), 1e-3); sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 20)
betas = torch.linspace(1e-4, 0.02, 100); abar = torch.cumprod(1 - betas, 0)
for step in range(20):
    x0 = torch.randn(64, 2); t = torch.randint(0, 100, (64,)); noise = torch.randn_like(x0)
    xt = abar[t].sqrt()[:, None] * x0 + (1 - abar[t]).sqrt()[:, None] * noise
    loss = F.mse_loss(net(xt, t), noise); opt.zero_grad(); loss.backward(); opt.step(); sched.step(); ema.update_parameters(net)
    if step % 5 == 0: print(step, loss.item())
ema.eval()
with torch.no_grad():
    x = torch.randn(16, 2)
    for i in reversed(range(100)):
        eps = ema(x, torch.full((16,), i)); x = (x - betas[i] / (1 - abar[i]).sqrt() * eps) / (1 - betas[i]).sqrt()
print(x.mean().item())
