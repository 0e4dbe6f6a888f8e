# CORRECT: time-series forecasting: a sine around 50 min-max scaled to 0..1, sliding windows, a
# batch_first LSTM predicting mean and variance (GaussianNLLLoss).
# expect: none
import math
import torch, torch.nn as nn
torch.manual_seed(0)
t = torch.arange(0, 400, dtype=torch.float32)
series = 50 + 20 * torch.sin(t * 2 * math.pi / 50) + torch.randn(400)
lo, hi = series[:300].min(), series[:300].max()
s = (series - lo) / (hi - lo)
W = 24
X = torch.stack([s[i:i + W] for i in range(300 - W)]).unsqueeze(-1)
Y = torch.stack([s[i + W] for i in range(300 - W)])
class Forecaster(nn.Module):
    def __init__(self):
        super().__init__(); self.lstm = nn.LSTM(1, 32, num_layers=2, batch_first=True, dropout=0.1); self.head = nn.Linear(32, 2)
    def forward(self, x):
        out, _ = self.lstm(x)
        mean, raw = self.head(out[:, -1]).unbind(-1)
        return mean, nn.functional.softplus(raw) + 1e-4
model = Forecaster(); opt = torch.optim.Adam(model.parameters(), lr=5e-3); crit = nn.GaussianNLLLoss()
for epoch in range(3):
    perm = torch.randperm(len(X))
    for i in range(0, len(X), 32):
        idx = perm[i:i + 32]
        mean, var = model(X[idx])
        loss = crit(mean, Y[idx], var)
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, round(loss.item(), 4))
model.eval()
with torch.no_grad():
    m, v = model(X[-4:])
print([round(x, 3) for x in (m * (hi - lo) + lo).tolist()])
