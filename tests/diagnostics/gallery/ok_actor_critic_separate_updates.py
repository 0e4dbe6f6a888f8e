# An actor-critic with two optimizers updated one after the other: the actor's loss
# uses the attached advantage and is backpropagated alone, then the critic's
# gradients are cleared before its own loss's backward, so what the policy loss put
# into the critic is thrown away (wasted work, not a wrong update). Not reported.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
for step in range(6):
    s, r = torch.randn(32, 4), torch.randn(32, 1)
    dist = torch.distributions.Categorical(logits=actor(s))
    a = dist.sample()
    advantage = r - critic(s)
    actor_loss = -(dist.log_prob(a) * advantage.squeeze(1)).mean()
    actor_opt.zero_grad()
    actor_loss.backward(retain_graph=True)
    actor_opt.step()
    critic_loss = advantage.pow(2).mean()
    critic_opt.zero_grad()
    critic_loss.backward()
    critic_opt.step()
