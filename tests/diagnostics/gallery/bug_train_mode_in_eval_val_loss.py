# MISTAKE: a validation loss computed every epoch under no_grad, with the model
# left in train mode (one validation batch). FIX: model.eval() before validating,
# model.train() after.
# expect: train_mode_in_eval "drop"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(self.drop(torch.tanh(self.fc1(x))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.MSELoss()
x, y = torch.randn(48, 12), torch.randn(48, 1)
xv, yv = torch.randn(16, 12), torch.randn(16, 1)
for epoch in range(3):
    for i in range(0, 48, 16):
        opt.zero_grad()
        loss_fn(model(x[i:i + 16]), y[i:i + 16]).backward()
        opt.step()
    with torch.no_grad():
        val = loss_fn(model(xv), yv).item()
