# MISTAKE: fine-tuning a transformers BERT classifier, then evaluating on the
# validation batches under torch.no_grad() without model.eval(): every Dropout
# of the model still drops units. FIX: model.eval() before evaluating.
# requires: transformers
# expect: train_mode_in_eval "bert.embeddings.dropout"
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=32, num_labels=3)
model = BertForSequenceClassification(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    ids = torch.randint(0, 128, (4, 16))
    out = model(input_ids=ids, labels=torch.randint(0, 3, (4,)))
    opt.zero_grad()
    out.loss.backward()
    opt.step()
correct = 0
with torch.no_grad():
    for _ in range(2):
        ids, labels = torch.randint(0, 128, (4, 16)), torch.randint(0, 3, (4,))
        correct += (model(input_ids=ids).logits.argmax(-1) == labels).sum().item()
