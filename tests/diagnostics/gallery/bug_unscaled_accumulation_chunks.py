# MISTAKE: a regression batch split into 2 chunks to save memory, each chunk's
# F.mse_loss (mean) backpropagated undivided inside a helper: the gradients are twice
# those of the whole batch, and the clipping threshold of 1.0 means half as much.
# FIX: (F.mse_loss(model(xb), yb) / len(chunks)).backward().
# expect: unscaled_accumulation ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


def train_step(model, opt, x, y, chunks=2):
    opt.zero_grad()
    for xb, yb in zip(x.chunk(chunks), y.chunk(chunks)):
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
w = torch.randn(8, 1)
for step in range(20):
    x = torch.randn(64, 8)
    train_step(model, opt, x, x @ w + 0.1 * torch.randn(64, 1))
