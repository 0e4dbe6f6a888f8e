# CORRECT: transformers GPT-2 from a tiny config with random weights, labels= gives
# the loss; an evaluation with labels fills eval_losses.
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2)
model = GPT2LMHeadModel(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    ids = torch.randint(0, 128, (4, 16))
    out = model(input_ids=ids, labels=ids)
    opt.zero_grad()
    out.loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    model(input_ids=torch.randint(0, 128, (8, 16)), labels=torch.randint(0, 128, (8, 16)))
