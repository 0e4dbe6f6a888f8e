# A batched A2C as it should be: the advantage is detached in the policy term and
# attached in the value loss; an entropy bonus (probabilities times their logs, both
# from the actor); a continuous-action head with a learned log-std beside it (a
# Normal's log_prob holds a log of the scale, weighted by detached advantages).
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 3))
critic = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 1))
mu_head = nn.Linear(6, 2)
log_std = nn.Parameter(torch.zeros(2))
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters(), *mu_head.parameters(),
                        log_std], lr=7e-4)
for update in range(6):
    states = torch.randn(5, 16, 6)
    rewards = torch.randn(5, 16)
    logits = actor(states)
    probs, log_probs_all = logits.softmax(-1), logits.log_softmax(-1)
    dist = torch.distributions.Categorical(logits=logits)
    actions = dist.sample()
    values = critic(states).squeeze(-1)
    returns = torch.zeros_like(rewards)
    running = torch.zeros(16)
    for t in reversed(range(5)):
        running = rewards[t] + 0.99 * running
        returns[t] = running
    advantages = returns - values
    policy_loss = -(dist.log_prob(actions) * advantages.detach()).mean()
    value_loss = advantages.pow(2).mean()
    entropy = -(probs * log_probs_all).sum(-1).mean()
    normal = torch.distributions.Normal(mu_head(states), log_std.exp())
    cont = normal.sample()
    cont_loss = -(normal.log_prob(cont).sum(-1) * advantages.detach()).mean()
    loss = policy_loss + cont_loss + 0.5 * value_loss - 0.01 * entropy
    opt.zero_grad()
    loss.backward()
    opt.step()
