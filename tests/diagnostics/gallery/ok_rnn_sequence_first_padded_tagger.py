# The same tagger fed sequence-first [time, batch] padded batches (pad_sequence's
# default layout), as an LSTM without batch_first takes them. Correct code.
# expect: none
import torch, torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
torch.manual_seed(0)
class Tagger(nn.Module):
    def __init__(s): super().__init__(); s.emb = nn.Embedding(30, 16, padding_idx=0); s.lstm = nn.LSTM(16, 32); s.fc = nn.Linear(32, 5)
    def forward(s, x): o, _ = s.lstm(s.emb(x)); return s.fc(o)
m = Tagger(); opt = torch.optim.Adam(m.parameters(), 1e-3)
for i in range(6):
    lens = torch.randint(3, 15, (8,))
    x = pad_sequence([torch.randint(1, 30, (int(L),)) for L in lens])          # [T, N]
    y = pad_sequence([torch.randint(0, 5, (int(L),)) for L in lens], padding_value=-100)
    out = m(x); loss = nn.functional.cross_entropy(out.reshape(-1, 5), y.reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
