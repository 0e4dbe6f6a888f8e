# MISTAKE: the dataset is sorted by class and the DataLoader does not shuffle,
# so every batch holds one class only and each step pulls the model towards it.
# FIX: DataLoader(..., shuffle=True).
# RUN: tensorscope run --headless examples/mistakes/single_class_batches.py
# expect: single_class_batches ""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
y = torch.arange(4).repeat_interleave(32)
x = torch.randn(128, 10) + y[:, None].float()
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=False)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for xb, yb in loader:
    opt.zero_grad()
    loss_fn(model(xb), yb).backward()
    opt.step()
