# MISTAKE: airline-passengers style forecasting: monthly counts (100..600) windowed and fed to
# the LSTM unscaled (the tutorial's MinMaxScaler step was skipped): the gates saturate from the
# first step. FIX: scale the series (fit the scaler on the training part), invert for plots.
# expect: unnormalized_input ""
import torch, torch.nn as nn
torch.manual_seed(0)
months = torch.arange(144.0)
passengers = (110 + 2.4 * months) * (1 + 0.15 * torch.sin(months * 2 * torch.pi / 12)) + torch.randn(144) * 5
lookback = 12
X = torch.stack([passengers[i:i + lookback] for i in range(len(passengers) - lookback)]).unsqueeze(-1)
y = passengers[lookback:].unsqueeze(-1)
class AirModel(nn.Module):
    def __init__(self):
        super().__init__(); self.lstm = nn.LSTM(input_size=1, hidden_size=50, num_layers=1, batch_first=True); self.linear = nn.Linear(50, 1)
    def forward(self, x):
        x, _ = self.lstm(x)
        return self.linear(x[:, -1, :])
model = AirModel(); optimizer = torch.optim.Adam(model.parameters()); loss_fn = nn.MSELoss()
for epoch in range(4):
    model.train()
    perm = torch.randperm(len(X))
    for i in range(0, len(X), 8):
        idx = perm[i:i + 8]
        loss = loss_fn(model(X[idx]), y[idx])
        optimizer.zero_grad(); loss.backward(); optimizer.step()
    print(epoch, round(loss.item(), 2))
