# MISTAKE: a binary classifier with a single output trained with
# CrossEntropyLoss (the labels of this batch happen to be class 0): the
# log-softmax over one score is always 0, so the loss is 0 and nothing learns.
# FIX: nn.BCEWithLogitsLoss() on the single output with float targets, or two
# outputs for CrossEntropyLoss.
# expect: softmax_dim "2"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
for step in range(12):
    x = torch.randn(32, 20)
    y = torch.zeros(32, dtype=torch.long)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
