# CORRECT: CrossEntropyLoss on logits; softmax only for display, under no_grad
# and with the model in eval mode; sigmoid + BCELoss.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for step in range(4):
    model.train()
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    opt.zero_grad()
    logits = model(x)
    loss = loss_fn(logits, y)
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        probs = torch.softmax(model(x), dim=1)
        print(f"step {step} loss {loss.item():.3f} p_max {probs.max().item():.3f}")

binary = nn.Sequential(nn.Linear(10, 1), nn.Sigmoid())
opt2 = torch.optim.SGD(binary.parameters(), lr=0.1)
for step in range(3):
    x, t = torch.randn(16, 10), torch.randint(0, 2, (16, 1)).float()
    opt2.zero_grad()
    nn.BCELoss()(binary(x), t).backward()
    opt2.step()
