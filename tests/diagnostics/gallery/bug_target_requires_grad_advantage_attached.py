# BUG: pytorch/examples reinforcement_learning/actor_critic with the advantage left
# attached: advantage = R - value instead of R - value.item(). The policy loss
# -log_prob * advantage then also trains the value head (it moves the values to make
# the policy loss smaller) on top of its smooth-L1 loss. FIX: value.item(), or
# advantage.detach() in the policy term.
# expect: target_requires_grad "value_head"
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 32)
        self.action_head = nn.Linear(32, 2)
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


class FakeEnv:
    def __init__(self):
        self.t = 0

    def reset(self):
        self.t = 0
        return torch.randn(4)

    def step(self, action):
        self.t += 1
        return torch.randn(4), float(action == 1), self.t >= 8


torch.manual_seed(543)
model = Policy()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
eps = torch.finfo(torch.float32).eps
env = FakeEnv()
for episode in range(4):
    state, saved, rewards, done = env.reset(), [], [], False
    while not done:
        probs, value = model(state.unsqueeze(0))
        m = Categorical(probs)
        action = m.sample()
        saved.append((m.log_prob(action), value))
        state, reward, done = env.step(action.item())
        rewards.append(reward)
    R, returns = 0.0, []
    for r in rewards[::-1]:
        R = r + 0.99 * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_losses, value_losses = [], []
    for (log_prob, value), R in zip(saved, returns):
        advantage = R - value
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([[R]])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
