# MISTAKE: house-price style tabular features (square feet, year built, lot size: values in the
# thousands) fed raw to an MLP: the first layer sees inputs ~1000x the unit scale its
# initialisation expects. Its gradients are huge (1e8), but Adam's steps stay at the learning
# rate: the unscaled input is the finding, not an exploding gradient. FIX: standardise each
# column with the training split's mean and std (StandardScaler).
# expect: unnormalized_input ""
import torch, torch.nn as nn
torch.manual_seed(0)
n = 512
sqft = torch.rand(n) * 3000 + 500; year = torch.randint(1900, 2020, (n,)).float(); lot = torch.rand(n) * 20000 + 1000
rooms = torch.randint(1, 8, (n,)).float()
X = torch.stack([sqft, year, lot, rooms], 1)
y = (sqft * 0.1 + (year - 1900) * 0.5 + rooms * 3) / 100
model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    perm = torch.randperm(n)
    for i in range(0, n, 64):
        idx = perm[i:i + 64]
        opt.zero_grad(); loss = nn.functional.mse_loss(model(X[idx]).squeeze(1), y[idx]); loss.backward(); opt.step()
    print(epoch, round(loss.item(), 4))
