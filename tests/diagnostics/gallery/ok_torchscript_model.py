# A TorchScript-compiled model (torch.jit.script) trained eagerly with Adam, then
# evaluated under no_grad in eval mode. Correct code.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


torch.manual_seed(0)
model = torch.jit.script(Net())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
model.eval()
with torch.no_grad():
    model(torch.randn(4, 8))
