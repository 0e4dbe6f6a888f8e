# Modules used more than once on purpose, or harmlessly: one ReLU and one
# Dropout instance listed at several positions of a Sequential (they hold no
# weights), one block applied in a loop (ALBERT-style sharing), an embedding
# tied to the output layer, and a list of distinct layers built with a
# comprehension.
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
act, drop = nn.ReLU(), nn.Dropout(0.1)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.stem = nn.Sequential(nn.Linear(32, 32), act, drop, nn.Linear(32, 32), act, drop)
        self.shared = nn.Sequential(nn.Linear(32, 32), nn.GELU())
        self.layers = nn.ModuleList([nn.Linear(32, 32) for _ in range(3)])
        self.out = nn.Linear(32, 50, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x):
        h = self.stem(self.emb(x))
        for _ in range(3):
            h = h + self.shared(h)
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.out(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(8):
    x = torch.randint(0, 50, (16, 12))
    logits = model(x[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 50), x[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
