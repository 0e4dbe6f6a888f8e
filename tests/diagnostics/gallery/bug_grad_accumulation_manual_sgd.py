# MISTAKE: a hand-written SGD loop (tutorial style) that never clears p.grad: each update uses the
# sum of all past gradients. FIX: p.grad = None (or model.zero_grad()) after the update.
# expect: grad_accumulation ""
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
X = torch.randn(400, 4); Y = X.sum(1, keepdim=True)
lr = 1e-3
for step in range(40):
    i = (step * 40) % 400
    loss = nn.functional.mse_loss(model(X[i:i+40]), Y[i:i+40])
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad          # missing p.grad.zero_() / model.zero_grad()
    if step % 10 == 0: print(step, round(loss.item(), 6))
