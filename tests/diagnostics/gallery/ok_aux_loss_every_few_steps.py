# An auxiliary reconstruction head whose loss is added every tenth step only (never at
# steps 0-7, nor at the every-eighth checks after): it is trained, in some steps only.
# At most an info finding. Correct code.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)
        self.aux = nn.Linear(32, 10)

    def forward(self, x, with_aux=False):
        h = self.body(x)
        return self.head(h), (self.aux(h) if with_aux else None)


torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(24):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    use_aux = step % 10 == 9
    out, rec = model(x, use_aux)
    loss = nn.functional.cross_entropy(out, y)
    if use_aux:
        loss = loss + 0.1 * nn.functional.mse_loss(rec, x)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
