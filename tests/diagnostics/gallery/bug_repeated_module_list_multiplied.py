# MISTAKE: nn.ModuleList([nn.Linear(64, 64)] * 4) lists one layer four times:
# the four "hidden layers" share one set of weights.
# FIX: nn.ModuleList([nn.Linear(64, 64) for _ in range(4)]).
# expect: repeated_module "hidden"
import torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(10, 64)
        self.hidden = nn.ModuleList([nn.Linear(64, 64)] * 4)   # one layer, four times
        self.out = nn.Linear(64, 3)
    def forward(self, x):
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x)
m = Net(); opt = torch.optim.Adam(m.parameters(), lr=1e-3)
print(sum(p.numel() for p in m.parameters()))
for step in range(10):
    x, y = torch.randn(32, 10), torch.randint(0, 3, (32,))
    loss = nn.functional.cross_entropy(m(x), y); opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 4))
