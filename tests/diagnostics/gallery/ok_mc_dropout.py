# Monte Carlo dropout for uncertainty: after training, the model is put in eval mode
# (BatchNorm uses its running statistics) and only its Dropout modules are switched
# back to train mode, then 8 stochastic forwards under no_grad are averaged.
# Deliberate: no finding.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(16, 10), torch.randn(16, 1)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
model.eval()
for m in model.modules():
    if isinstance(m, nn.Dropout):
        m.train()
x_new = torch.randn(5, 10)
with torch.no_grad():
    samples = torch.stack([model(x_new) for _ in range(8)])
mean, std = samples.mean(0), samples.std(0)
