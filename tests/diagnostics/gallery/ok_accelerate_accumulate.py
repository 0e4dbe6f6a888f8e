# An accelerate training loop with gradient accumulation (accelerator.accumulate),
# accelerator.backward, clip_grad_norm_, a linear warmup scheduler, and an
# evaluation with accelerator.gather under no_grad in eval mode. Correct code.
# requires: accelerate
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from accelerate import Accelerator
from torch import nn

torch.manual_seed(0)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
ds = torch.utils.data.TensorDataset(torch.randn(96, 10), torch.randint(0, 4, (96,)))
train_dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)
eval_dl = torch.utils.data.DataLoader(ds, batch_size=16)
model, opt, train_dl, eval_dl, sched = accelerator.prepare(model, opt, train_dl, eval_dl, sched)
for epoch in range(2):
    model.train()
    for x, y in train_dl:
        with accelerator.accumulate(model):
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in eval_dl:
            preds = accelerator.gather(model(x).argmax(-1))
            correct += (preds == accelerator.gather(y)).sum().item()
