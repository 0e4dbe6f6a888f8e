# CORRECT: train, save a checkpoint, build a fresh model and optimizer, load
# the checkpoint and resume training.
# expect: none
import io

import torch
from torch import nn


def make():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def train(model, opt, steps):
    for _ in range(steps):
        x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()


torch.manual_seed(0)
model, opt = make()
train(model, opt, 3)
buf = io.BytesIO()
torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
buf.seek(0)
model2, opt2 = make()
state = torch.load(buf)
model2.load_state_dict(state["model"])
opt2.load_state_dict(state["opt"])
print(train(model2, opt2, 3))
