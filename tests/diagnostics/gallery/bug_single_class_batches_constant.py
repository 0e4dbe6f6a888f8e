# MISTAKE: the labels are built as zeros (a bug in the dataset code): every
# target is class 0, so the model learns to always predict it.
# expect: single_class_batches ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
X = torch.randn(160, 12)
Y = torch.zeros(160, dtype=torch.long)
for i in range(0, 160, 32):
    opt.zero_grad()
    criterion(model(X[i:i + 32]), Y[i:i + 32]).backward()
    opt.step()
