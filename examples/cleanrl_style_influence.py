"""A single-file PPO loop in CleanRL's shape that drops the harmful records each iteration (IIF).

    python examples/cleanrl_style_influence.py [--env-id CartPole-v1] [--total-timesteps 50000] [--p 50]

The only IIF lines are marked `# IIF`: score the iteration's records with `record_influence` at the
policy that collected them (`cleanrl_policy` reads the agent's actor), take `drop_set`, and let the
minibatches draw from the kept records only (`kept_minibatches`: never a 1-record minibatch, whose
advantage std would be NaN).
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from rlinfluence.attribution import cleanrl_policy, drop_set, kept_minibatches, normalize_advantages, record_influence


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=50_000)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=2.5e-4)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--clip-coef", type=float, default=0.2)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--vf-coef", type=float, default=0.5)
    parser.add_argument("--max-grad-norm", type=float, default=0.5)
    parser.add_argument("--p", type=float, default=50.0, help="IIF: percent of the NEGATIVE records to drop")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_actions)
        )

    def distribution(self, obs: torch.Tensor) -> Categorical:
        return Categorical(logits=self.actor(obs))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)


def main() -> None:
    args = parse_args()
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id)) for _ in range(args.num_envs)]
    )
    obs_dim, n_actions = int(np.prod(envs.single_observation_space.shape)), int(envs.single_action_space.n)
    agent = Agent(obs_dim, n_actions)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim))
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((args.num_steps, args.num_envs)) for _ in range(4))

    next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
    next_done = torch.zeros(args.num_envs)
    returns_seen: list[float] = []
    for iteration in range(1, args.total_timesteps // batch_size + 1):
        for step in range(args.num_steps):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                distribution = agent.distribution(next_obs)
                actions[step] = distribution.sample()
                logprobs[step], values[step] = distribution.log_prob(actions[step]), agent.value(next_obs)
            next_obs_np, reward, terminated, truncated, infos = envs.step(actions[step].numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
            next_done = torch.as_tensor(np.logical_or(terminated, truncated), dtype=torch.float32)
            if "episode" in infos:
                returns_seen.extend(infos["episode"]["r"][infos["_episode"]].tolist())

        with torch.no_grad():  # GAE
            next_value = agent.value(next_obs)
            advantages = torch.zeros_like(rewards)
            running = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                not_done = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                following = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * not_done - values[t]
                running = delta + args.gamma * args.gae_lambda * not_done * running
                advantages[t] = running
            returns = advantages + values

        b_obs, b_actions, b_logprobs = obs.reshape(-1, obs_dim), actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

        records = {"observations": b_obs, "actions": b_actions, "old_log_probs": b_logprobs, "advantages": b_advantages}
        scores = record_influence(
            *cleanrl_policy(agent), records, clip_range=args.clip_coef, ent_coef=args.ent_coef
        )  # IIF
        dropped = drop_set(scores, args.p)  # IIF
        kept = np.setdiff1d(np.arange(batch_size), dropped)  # IIF

        for _ in range(args.update_epochs):
            for ids in kept_minibatches(kept, minibatch_size, rng):  # IIF: instead of range(0, batch_size, ...)
                distribution = agent.distribution(b_obs[ids])
                ratio = torch.exp(distribution.log_prob(b_actions[ids]) - b_logprobs[ids])
                mb_advantages = normalize_advantages(b_advantages[ids])  # per minibatch, as CleanRL does
                pg_loss = torch.max(
                    -mb_advantages * ratio, -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * (agent.value(b_obs[ids]) - b_returns[ids]).pow(2).mean()
                loss = pg_loss - args.ent_coef * distribution.entropy().mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        recent = np.mean(returns_seen[-20:]) if returns_seen else float("nan")
        print(
            f"iteration {iteration}: mean return (last 20 episodes) {recent:.1f}, "
            f"{int((scores < 0).sum())} negative, {len(dropped)} of {batch_size} records dropped "
            f"({len(dropped) / batch_size:.0%} of the batch)"
        )


if __name__ == "__main__":
    main()
