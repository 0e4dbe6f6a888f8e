# BUG: the feature extractor's forward is wrapped in torch.no_grad() "to save memory",
# while the optimizer holds its parameters: backward() stops at the head, so the
# extractor never learns (only the head's two layers train).
# expect: unused_parameter ""
import torch
from torch import nn

torch.manual_seed(0)
features = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
head = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.Adam([*features.parameters(), *head.parameters()], lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for step in range(8):
    x = torch.randn(32, 20)
    y = (x[:, 0] > 0).long()
    with torch.no_grad():
        h = features(x)
    loss = loss_fn(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
