# MISTAKE: the model ends in nn.Softmax and its output goes to CrossEntropyLoss,
# which applies log-softmax itself: the softmax is applied twice and learning stalls.
# FIX: remove the final nn.Softmax (CrossEntropyLoss expects raw logits).
# RUN: tensorscope run --headless examples/mistakes/double_activation.py
# expect: double_activation "3"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
