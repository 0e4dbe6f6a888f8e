# CORRECT: a BertModel backbone with an own token-classification head on last_hidden_state: the
# pooler's output is returned but unused (an info finding, not a warning).
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch, torch.nn as nn, torch.nn.functional as F
from transformers import BertConfig, BertModel
torch.manual_seed(0)
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = BertModel(BertConfig(vocab_size=150, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=32))
        self.drop = nn.Dropout(0.1); self.cls = nn.Linear(32, 5)
    def forward(self, ids, mask):
        return self.cls(self.drop(self.bert(input_ids=ids, attention_mask=mask).last_hidden_state))
model = Tagger(); opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
for step in range(12):
    lens = torch.randint(5, 16, (8,)); mask = (torch.arange(16)[None] < lens[:, None]).long()
    ids = torch.randint(1, 150, (8, 16)) * mask
    tags = (ids % 5).masked_fill(mask == 0, -100)
    loss = F.cross_entropy(model(ids, mask).view(-1, 5), tags.view(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    print(step, repr(loss.item()))
print('final', repr(sum(p.double().sum().item() for p in model.parameters())))
