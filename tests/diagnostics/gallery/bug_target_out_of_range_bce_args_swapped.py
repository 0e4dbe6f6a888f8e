# MISTAKE: the arguments of BCEWithLogitsLoss swapped, criterion(labels, logits): the model's
# output is the target, so the loss differentiates through the target term and has no minimum.
# FIX: criterion(logits, labels).
# expect: target_out_of_range "2"
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = nn.BCEWithLogitsLoss(); opt = torch.optim.Adam(model.parameters(), lr=1e-3)
X = torch.randn(256, 10); Y = (X[:, 0] > 0).float().unsqueeze(1)
for epoch in range(3):
    for i in range(0, 256, 32):
        logits = model(X[i:i + 32])
        loss = criterion(Y[i:i + 32], logits)
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, round(loss.item(), 4))
