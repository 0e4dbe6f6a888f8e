# CORRECT: transformers BERT for sequence classification, tiny config, random weights,
# an attention mask with padding, then an evaluation.
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=32, num_labels=3)
model = BertForSequenceClassification(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    ids = torch.randint(0, 128, (4, 16))
    mask = torch.ones_like(ids)
    mask[:, 12:] = 0
    out = model(input_ids=ids, attention_mask=mask, labels=torch.randint(0, 3, (4,)))
    opt.zero_grad()
    out.loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    model(input_ids=torch.randint(0, 128, (8, 16)))
