# CORRECT: a POS tagger whose [N, T, C] scores are handed to CrossEntropyLoss with the
# classes at dimension 1 (transposed) and, once more, flattened to [N*T, C].
# expect: none
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
    scores = model(words)
    loss = criterion(scores.transpose(1, 2), tags) + criterion(scores.reshape(-1, TAGS), tags.reshape(-1))
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
