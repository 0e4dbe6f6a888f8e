# CORRECT: transformers T5 (encoder-decoder), tiny config, random weights, labels=.
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import T5Config, T5ForConditionalGeneration

torch.manual_seed(0)
cfg = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2,
               decoder_start_token_id=0, pad_token_id=0)
model = T5ForConditionalGeneration(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    src, tgt = torch.randint(1, 128, (4, 12)), torch.randint(1, 128, (4, 8))
    loss = model(input_ids=src, labels=tgt).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
