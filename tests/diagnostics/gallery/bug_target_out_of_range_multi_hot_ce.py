# MISTAKE: a multi-label task (each sample may carry several tags) trained with
# CrossEntropyLoss on multi-hot 0/1 targets: the softmax makes the tags
# compete, so two true tags pull against each other.
# FIX: nn.BCEWithLogitsLoss() on the same logits and targets.
# expect: target_out_of_range "2"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 6))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
for step in range(10):
    x = torch.randn(32, 20)
    tags = (torch.rand(32, 6) < 0.3).float()
    loss = criterion(model(x), tags)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
