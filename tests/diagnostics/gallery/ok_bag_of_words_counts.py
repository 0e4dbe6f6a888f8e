# CORRECT: a bag-of-words document classifier on raw term counts (vocabulary 1024, mostly zeros):
# whole numbers in a square number of columns, but not an image.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
V, N = 1024, 32
zipf = 1.0 / torch.arange(1, V + 1).float(); zipf /= zipf.sum()
topic = torch.rand(2, V) * 0.5 + 0.75
def docs(n):
    y = torch.randint(0, 2, (n,))
    probs = zipf * topic[y]; probs = probs / probs.sum(1, keepdim=True)
    lens = torch.randint(200, 800, (n,))
    counts = torch.stack([torch.bincount(torch.multinomial(p, int(l), replacement=True), minlength=V) for p, l in zip(probs, lens)])
    return counts.float(), y
model = nn.Sequential(nn.Linear(V, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
for step in range(10):
    x, y = docs(N)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, repr(loss.item()), int(x.max()))
print('final', repr(sum(p.double().sum().item() for p in model.parameters())))
