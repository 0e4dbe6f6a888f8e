# Linear probe, then fine-tuning: for the first epochs the backbone runs under
# torch.no_grad() and only the head learns (one optimizer holds both); then the whole
# model is trained. The frozen phase is deliberate: at most an info finding.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
head = nn.Linear(32, 4)
model = nn.Sequential(backbone, head)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x_all, y_all = torch.randn(128, 16), torch.randint(0, 4, (128,))
for epoch in range(4):
    probe = epoch < 2
    for i in range(0, 128, 16):
        x, y = x_all[i:i + 16], y_all[i:i + 16]
        if probe:
            with torch.no_grad():
                feats = backbone(x)
            out = head(feats)
        else:
            out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
