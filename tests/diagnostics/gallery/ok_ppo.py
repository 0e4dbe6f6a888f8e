# CORRECT: ppo in the usual style (tiny sizes, random data).
# expect: none
import torch, torch.nn as nn
from torch.distributions import Categorical
torch.manual_seed(0)
class AC(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 4))
        self.critic = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
    def get(self, x, action=None):
        logits = self.actor(x); dist = Categorical(logits=logits)
        if action is None: action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x).squeeze(-1)
agent = AC(); opt = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
for update in range(3):
    obs = torch.randn(128, 8)
    with torch.no_grad():
        actions, logp, _, values = agent.get(obs)
    rewards = torch.randn(128); adv = rewards - values; returns = adv + values
    for epoch in range(4):
        idx = torch.randperm(128)
        for start in range(0, 128, 32):
            mb = idx[start:start + 32]
            _, newlogp, ent, newv = agent.get(obs[mb], actions[mb])
            ratio = (newlogp - logp[mb]).exp(); a = adv[mb]; a = (a - a.mean()) / (a.std() + 1e-8)
            pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
            vloss = 0.5 * ((newv - returns[mb]) ** 2).mean()
            loss = pg - 0.01 * ent.mean() + 0.5 * vloss
            opt.zero_grad(); loss.backward(); nn.utils.clip_grad_norm_(agent.parameters(), 0.5); opt.step()
    print(update, loss.item())
