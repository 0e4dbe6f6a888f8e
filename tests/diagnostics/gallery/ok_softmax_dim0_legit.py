# CORRECT: softmaxes over dimension 0 that are right: attention pooling over the instances
# of a bag ([N, 1], multiple-instance learning), attention over time in a sequence-first
# GRU encoder ([T, B]), a CLIP loss normalising its square similarity matrix both ways,
# a learned mixture of layers (softmax of a parameter), and a policy over actions for one
# unbatched state (REINFORCE).
# expect: none
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class MIL(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.att = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 1))
        self.cls = nn.Linear(16, 1)
        self.mix = nn.Parameter(torch.zeros(2))

    def forward(self, bag):                      # bag: [N, 12] instances
        h = self.feat(bag)
        a = F.softmax(self.att(h), dim=0)        # [N, 1]: weights over the instances
        w = F.softmax(self.mix, dim=0)           # a learned mixture
        z = (a * h).sum(0, keepdim=True) * w[0] + h.mean(0, keepdim=True) * w[1]
        return self.cls(z)


class SeqFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.rnn = nn.GRU(16, 16)                # sequence first: [T, B, H]
        self.score = nn.Linear(16, 1)
        self.out = nn.Linear(16, 3)

    def forward(self, tokens):                   # tokens: [T, B]
        h, _ = self.rnn(self.emb(tokens))
        a = F.softmax(self.score(h).squeeze(-1), dim=0)    # [T, B]: over time
        return self.out((a.unsqueeze(-1) * h).sum(0))


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.img, self.txt = nn.Linear(10, 8), nn.Linear(6, 8)

    def forward(self, x, t):
        a, b = F.normalize(self.img(x), dim=-1), F.normalize(self.txt(t), dim=-1)
        return a @ b.T / 0.07


policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
mil, seq, clip = MIL(), SeqFirst(), Clip()
opt = torch.optim.Adam([*mil.parameters(), *seq.parameters(), *clip.parameters(),
                        *policy.parameters()], lr=1e-3)
for step in range(6):
    bag, label = torch.randn(7, 12), torch.randint(0, 2, (1, 1)).float()
    loss_mil = F.binary_cross_entropy_with_logits(mil(bag), label)
    tokens, y = torch.randint(0, 30, (9, 5)), torch.randint(0, 3, (5,))
    loss_seq = F.cross_entropy(seq(tokens), y)
    sim = clip(torch.randn(6, 10), torch.randn(6, 6))
    loss_clip = -(F.log_softmax(sim, dim=0).diag().mean() + F.log_softmax(sim, dim=1).diag().mean()) / 2
    state = torch.randn(4)
    probs = F.softmax(policy(state), dim=0)
    action = torch.multinomial(probs, 1)
    loss_pg = -torch.log(probs[action]).sum() * torch.randn(())
    loss = loss_mil + loss_seq + loss_clip + loss_pg
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
