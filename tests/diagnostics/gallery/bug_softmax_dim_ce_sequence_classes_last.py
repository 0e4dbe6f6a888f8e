# BUG: a POS tagger's [N, T, C] scores (a Linear over the GRU states, classes last) go
# straight into nn.CrossEntropyLoss, which takes the classes from dimension 1. With
# sentences of T == C tokens PyTorch raises nothing: it normalises over the positions.
# FIX: criterion(scores.transpose(1, 2), tags), or scores.reshape(-1, C) with tags.reshape(-1).
# expect: softmax_dim "tagger"
import torch
from torch import nn

torch.manual_seed(0)
TAGS, T = 12, 12
class Tagger(nn.Module):
    def __init__(self, vocab=100):
        super().__init__()
        self.embed = nn.Embedding(vocab, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True, bidirectional=True)
        self.tagger = nn.Linear(128, TAGS)
    def forward(self, words):
        h, _ = self.rnn(self.embed(words))
        return self.tagger(h)
model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
for step in range(6):
    words, tags = torch.randint(0, 100, (8, T)), torch.randint(0, TAGS, (8, T))
    opt.zero_grad()
    loss = criterion(model(words), tags)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
