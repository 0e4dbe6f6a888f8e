# BUG: a batched A2C with separate actor and critic networks and one optimizer: the
# advantage returns - values is used attached both in the value loss (right) and as
# the weight of the log-probabilities (wrong), so the policy loss's gradient reaches
# the critic. FIX: -(log_probs * advantages.detach()).mean().
# expect: target_requires_grad ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 3))
critic = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=7e-4)
for update in range(6):
    states = torch.randn(5, 16, 6)          # 5 steps of 16 environments
    rewards = torch.randn(5, 16)
    dist = torch.distributions.Categorical(logits=actor(states))
    actions = dist.sample()
    values = critic(states).squeeze(-1)
    returns = torch.zeros_like(rewards)
    running = torch.zeros(16)
    for t in reversed(range(5)):
        running = rewards[t] + 0.99 * running
        returns[t] = running
    advantages = returns - values
    policy_loss = -(dist.log_prob(actions) * advantages).mean()
    value_loss = advantages.pow(2).mean()
    entropy = dist.entropy().mean()
    loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([*actor.parameters(), *critic.parameters()], 0.5)
    opt.step()
