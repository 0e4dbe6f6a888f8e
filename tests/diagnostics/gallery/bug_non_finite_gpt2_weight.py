# MISTAKE: a NaN in one weight of a GPT-2 (here written by hand; in practice a damaged
# checkpoint): every activation after that layer is NaN from the first step.
# FIX: check the loaded weights (torch.isfinite(p).all()).
# requires: transformers
# expect: non_finite "transformer.h.1.mlp.c_fc"
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=3,
                                   n_head=2))
with torch.no_grad():
    model.transformer.h[1].mlp.c_fc.weight[3, 5] = float("nan")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    ids = torch.randint(0, 128, (4, 16))
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
