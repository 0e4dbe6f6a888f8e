# MISTAKE: Adam with eps=0: a parameter whose gradient is exactly zero gets 0/0 = NaN
# from the update, although the forward and the gradients are finite.
# FIX: keep Adam's default eps (1e-8).
# expect: non_finite "emb"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, idx):
        return self.head(self.emb(idx).mean(1))


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=0.0)
for step in range(4):
    idx = torch.randint(0, 5, (16, 3))      # rows 5..9 never used: zero gradient
    y = torch.randn(16, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(idx), y)
    loss.backward()
    opt.step()
