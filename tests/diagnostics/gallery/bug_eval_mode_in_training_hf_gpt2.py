# MISTAKE: a GPT-2 fine-tuning loop that evaluates every 3 steps with model.eval()
# and never switches back with model.train(): the next steps train with every
# Dropout switched off. FIX: model.train() after the evaluation.
# requires: transformers
# expect: eval_mode_in_training "transformer.drop"
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2)
model = GPT2LMHeadModel(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model.train()
for step in range(6):
    ids = torch.randint(0, 128, (4, 16))
    out = model(input_ids=ids, labels=ids)
    opt.zero_grad()
    out.loss.backward()
    opt.step()
    if step % 3 == 2:
        model.eval()
        with torch.no_grad():
            val = model(input_ids=ids, labels=ids).loss.item()
