# Actor-critic with a target network (DDPG-style): separate actor and critic
# optimizers, target networks made with copy.deepcopy, updated by Polyak
# averaging under no_grad, the critic's target computed under no_grad, the
# actor loss through the critic (critic gradients zeroed before its own step).
# Correct code.
# expect: none
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1), nn.Tanh())
critic = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
actor_t, critic_t = copy.deepcopy(actor), copy.deepcopy(critic)
for p in list(actor_t.parameters()) + list(critic_t.parameters()):
    p.requires_grad_(False)
opt_a = torch.optim.Adam(actor.parameters(), lr=1e-3)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
for step in range(6):
    s, a = torch.randn(16, 3), torch.rand(16, 1) * 2 - 1
    r, s2, done = torch.randn(16, 1), torch.randn(16, 3), torch.zeros(16, 1)
    with torch.no_grad():
        q_target = r + 0.99 * (1 - done) * critic_t(torch.cat([s2, actor_t(s2)], 1))
    q = critic(torch.cat([s, a], 1))
    critic_loss = nn.functional.mse_loss(q, q_target)
    opt_c.zero_grad()
    critic_loss.backward()
    opt_c.step()
    actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
    opt_a.zero_grad()
    actor_loss.backward()
    opt_a.step()
    with torch.no_grad():
        for net, tgt in ((actor, actor_t), (critic, critic_t)):
            for p, pt in zip(net.parameters(), tgt.parameters()):
                pt.mul_(0.995).add_(p, alpha=0.005)
