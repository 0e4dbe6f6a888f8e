# CORRECT: a classifier with a center loss: each feature is pulled towards its class
# centre, a learnable embedding trained on purpose (the target requires grad).
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
features = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8))
head = nn.Linear(8, 4)
centers = nn.Embedding(4, 8)
params = [*features.parameters(), *head.parameters(), *centers.parameters()]
opt = torch.optim.SGD(params, lr=0.05)
ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    f = features(x)
    loss = ce(head(f), y) + 0.1 * mse(f, centers(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
