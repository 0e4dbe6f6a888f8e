# custom autograd.Function (straight-through quantizer), shared params across modules, module reused twice,
# expect: none
# in-place ops, forward returning dict / dataclass / None, int and bool tensors
import torch
from torch import nn
from dataclasses import dataclass
torch.manual_seed(0)
class STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x); return x.round()
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors; return g * (x.abs() < 2).to(g.dtype)
@dataclass
class Out:
    logits: torch.Tensor; aux: torch.Tensor | None = None
class Quant(nn.Module):
    def forward(self, x): return STE.apply(x)
class Side(nn.Module):
    def forward(self, x): return None
class Enc(nn.Module):
    def __init__(self, shared):
        super().__init__(); self.shared = shared; self.q = Quant(); self.side = Side()
    def forward(self, x, mask):
        h = self.shared(x); h = h.relu_(); h = h * mask.unsqueeze(-1).float(); self.side(h)
        return {"h": self.q(h * 3) / 3, "n": mask.sum(-1)}
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.shared = nn.Linear(8, 8); self.enc = Enc(self.shared); self.head = nn.Linear(8, 4)
    def forward(self, x, mask):
        d = self.enc(x, mask); h = self.shared(d["h"])  # shared module reused
        h = h + self.shared(h)  # twice more
        logits = self.head(h); logits.clamp_(-10, 10)
        return Out(logits=logits, aux=d["n"])
net = Net(); opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
for step in range(5):
    x = torch.randn(6, 5, 8); mask = torch.rand(6, 5) > 0.2; y = torch.randint(0, 4, (6, 5))
    out = net(x, mask)
    loss = nn.functional.cross_entropy(out.logits.flatten(0, 1), y.flatten(), reduction="none")
    loss = (loss * mask.flatten()).sum() / mask.sum()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.6f} tokens {int(out.aux.sum())}")
