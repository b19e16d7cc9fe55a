"""A CleanRL-shaped PPO on CartPole (its Agent with get_value / get_action_and_value, gymnasium 0.29's vector
API with `final_info`) with IIF added where a CleanRL user would add it: the lines marked `# IIF`.
tests/library/test_library.py runs it in a fresh venv that holds `rlinfluence` alone beside CleanRL's pins."""

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from rlinfluence.attribution import drop_set, record_influence  # IIF

NUM_ENVS, NUM_STEPS, ITERATIONS, NUM_MINIBATCHES, EPOCHS = 2, 128, 2, 4, 2
GAMMA, GAE_LAMBDA, CLIP_COEF, ENT_COEF = 0.99, 0.95, 0.2, 0.01


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, envs.single_action_space.n))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


torch.manual_seed(1)
envs = gym.vector.SyncVectorEnv(
    [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1")) for _ in range(NUM_ENVS)]
)
agent = Agent(envs)
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
next_obs, next_done = torch.Tensor(envs.reset(seed=1)[0]), torch.zeros(NUM_ENVS)
obs = torch.zeros((NUM_STEPS, *next_obs.shape))
actions, logprobs, rewards, dones, values = (torch.zeros((NUM_STEPS, NUM_ENVS)) for _ in range(5))
episodes = 0
for iteration in range(ITERATIONS):
    for step in range(NUM_STEPS):
        obs[step], dones[step] = next_obs, next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        actions[step], logprobs[step], values[step] = action, logprob, value.flatten()
        next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
        rewards[step], next_obs = torch.tensor(reward), torch.Tensor(next_obs)
        next_done = torch.Tensor(np.logical_or(terminations, truncations))
        episodes += sum(info is not None and "episode" in info for info in infos.get("final_info", []))
    with torch.no_grad():
        next_value = agent.get_value(next_obs).flatten()
        advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros(NUM_ENVS)
        for t in reversed(range(NUM_STEPS)):
            nextnonterminal = 1.0 - (next_done if t == NUM_STEPS - 1 else dones[t + 1])
            nextvalues = next_value if t == NUM_STEPS - 1 else values[t + 1]
            delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
        returns = advantages + values
    b_obs = obs.reshape(-1, next_obs.shape[-1])
    b_actions, b_logprobs = actions.reshape(-1).long(), logprobs.reshape(-1)
    b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

    records = {"observations": b_obs, "actions": b_actions, "old_log_probs": b_logprobs, "advantages": b_advantages}
    scores = record_influence(  # IIF: each record's influence at the policy that collected it
        lambda x: Categorical(logits=agent.actor(x)), agent, records, clip_range=CLIP_COEF, ent_coef=ENT_COEF
    )
    dropped = drop_set(scores, 50)  # IIF: half of the negative-influence records
    b_inds = np.setdiff1d(np.arange(len(b_advantages)), dropped)  # IIF: the minibatches draw the kept ones

    for _ in range(EPOCHS):
        np.random.shuffle(b_inds)
        for mb_inds in np.array_split(b_inds, NUM_MINIBATCHES):
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
            ratio = (newlogprob - b_logprobs[mb_inds]).exp()
            mb_advantages = b_advantages[mb_inds]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss = torch.max(
                -mb_advantages * ratio, -mb_advantages * torch.clamp(ratio, 1 - CLIP_COEF, 1 + CLIP_COEF)
            ).mean()
            v_loss = 0.5 * ((newvalue.flatten() - b_returns[mb_inds]) ** 2).mean()
            loss = pg_loss - ENT_COEF * entropy.mean() + 0.5 * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
    print(f"iteration {iteration}: {len(dropped)} of {len(scores)} records dropped, loss {loss.item():.4f}")
print(f"episodes finished: {episodes}")
