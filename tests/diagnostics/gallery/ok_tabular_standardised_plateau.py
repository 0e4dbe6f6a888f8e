# CORRECT: Kaggle-style tabular regression: raw columns in the thousands standardised with the
# training split's mean/std before the model, Huber loss, ReduceLROnPlateau, early stopping.
# expect: none
import copy
import numpy as np
import torch, torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader
rng = np.random.default_rng(0); torch.manual_seed(0)
X = rng.normal(size=(600, 8)) * np.array([1, 10, 100, 1000, 1, 5, 50, 0.1]) + 30
y = (X[:, 0] * 2 + X[:, 1] * 0.1 - X[:, 3] * 0.001 + rng.normal(size=600)).astype(np.float32)
X_tr, X_va, y_tr, y_va = X[:480], X[480:], y[:480], y[480:]
mu, sd = X_tr.mean(0), X_tr.std(0)
X_tr = ((X_tr - mu) / sd).astype(np.float32); X_va = ((X_va - mu) / sd).astype(np.float32)
y_mu, y_sd = y_tr.mean(), y_tr.std()
train_loader = DataLoader(TensorDataset(torch.from_numpy(X_tr), torch.from_numpy((y_tr - y_mu) / y_sd)), batch_size=64, shuffle=True)
Xv, yv = torch.from_numpy(X_va), torch.from_numpy((y_va - y_mu) / y_sd)
model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=2)
criterion = nn.HuberLoss()
best, best_state, bad = float("inf"), None, 0
for epoch in range(12):
    model.train(); tot = 0.0
    for xb, yb in train_loader:
        optimizer.zero_grad()
        pred = model(xb).squeeze(1)
        loss = criterion(pred, yb)
        loss.backward(); optimizer.step()
        tot += loss.item() * len(xb)
    model.eval()
    with torch.no_grad():
        val = criterion(model(Xv).squeeze(1), yv).item()
    scheduler.step(val)
    if val < best - 1e-4:
        best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
    else:
        bad += 1
        if bad >= 4: break
    print(epoch, round(tot / len(X_tr), 4), round(val, 4))
model.load_state_dict(best_state)
print("best", round(best, 4))
