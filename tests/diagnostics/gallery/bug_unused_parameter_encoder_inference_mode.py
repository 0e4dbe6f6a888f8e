# BUG: the encoder runs under torch.inference_mode() (its output cloned so the head may
# save it for backward), yet one optimizer holds the encoder and the head: the encoder
# gets no gradient and never learns.
# expect: unused_parameter ""
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(16, 48), nn.Tanh(), nn.Linear(48, 24))
head = nn.Linear(24, 4)
opt = torch.optim.SGD([{"params": encoder.parameters()}, {"params": head.parameters()}],
                      lr=0.05, momentum=0.9)
for step in range(8):
    x, y = torch.randn(16, 16), torch.randint(0, 4, (16,))
    with torch.inference_mode():
        z = encoder(x)
    loss = nn.functional.cross_entropy(head(z.clone()), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
