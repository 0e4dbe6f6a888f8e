# CORRECT: a CNN with BatchNorm and Dropout: model.train() for training,
# model.eval() + no_grad for validation each epoch, validation loss with .item().
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Dropout(0.3), nn.Linear(16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(2):
    model.train()
    for step in range(3):
        x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    val = 0.0
    with torch.no_grad():
        for _ in range(3):
            x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
            val += loss_fn(model(x), y).item()
    print(epoch, val / 3)
