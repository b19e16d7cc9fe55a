"""`InfluenceFilter`: the SB3 callback that scores a rollout's records and drops the harmful ones."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import ActorCriticPolicy

from rlinfluence.attribution import drop_set, record_influence
from rlinfluence.attribution.drop import check_drop_settings
from rlinfluence.attribution.scores import check_target
from rlinfluence.sb3.buffer import IIFRolloutBuffer, check_action_space
from rlinfluence.sb3.policy import sb3_policy

# The buffers PPO builds by default, which the callback replaces with IIFRolloutBuffer (their subclasses may
# change what `get` draws, which the IIF buffer would silently undo).
STOCK_BUFFERS = (RolloutBuffer, DictRolloutBuffer)


def sb3_records(buffer: RolloutBuffer, action_space: spaces.Space, device: torch.device) -> dict[str, Any]:
    """A filled SB3 rollout buffer (RolloutBuffer or DictRolloutBuffer) as the attribution API's records, in
    SB3's flat (env-major) order, actions as SB3's PPO feeds them to the policy. The buffer is left as it is."""
    check_action_space(action_space)

    def flat(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(buffer.swap_and_flatten(array), device=device)

    observations = buffer.observations
    actions = flat(buffer.actions)
    return {
        "observations": (
            {key: flat(value) for key, value in observations.items()}
            if isinstance(observations, dict)
            else flat(observations)
        ),
        "actions": actions.long().flatten() if isinstance(action_space, spaces.Discrete) else actions,
        "old_log_probs": flat(buffer.log_probs).flatten(),
        "advantages": flat(buffer.advantages).flatten(),
    }


class InfluenceFilter(BaseCallback):
    """Scores every record of each rollout at θ_k, the policy that collected it, and (mode `iif`) has the
    update skip the ⌊n_neg·p/100⌋ most negative ones, (`random`) as many random ones, or (`none`) none.

    p: a percent of the NEGATIVE-score records, not of the rollout (`dropped_fraction` reports the share of the
    rollout dropped), or "auto" (mode `iif`: the count the held-out f_return
    predicts to help, as the CLI's method.p=auto). target: "return" (f_return on the rollout itself, the
    IIF default) or "action" (f_action at `target_state`, `target_action`; a dict of arrays for a Dict
    observation space). Each round's scores, drops and counts go to `rounds` (one dict per
    rollout) and their summary to SB3's logger under `influence/`. Modes other than `none` need the IIF buffer:
    the callback swaps it in for PPO's stock one when learning starts (so `model.learn(..., callback=...)`, or
    rl-zoo's `callback:` key, is enough), or the model is built with `rollout_buffer_class=IIFRolloutBuffer`;
    `seed` seeds the `random` mode's draws."""

    def __init__(
        self,
        mode: str = "iif",
        p: float | str = 50.0,
        target: str = "return",
        *,
        target_state: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,  # a dict: a Dict space's
        target_action: npt.ArrayLike | None = None,
        seed: int | None = None,
        chunk_size: int = 4096,
        verbose: int = 0,
    ):
        super().__init__(verbose)
        check_drop_settings(mode, p)
        check_target(target, target_state, target_action)
        self.mode, self.p, self.target = mode, p, target
        self.target_state, self.target_action = target_state, target_action
        self.rng = np.random.default_rng(seed)
        self.chunk_size = chunk_size
        self.rounds: list[dict[str, Any]] = []

    @property
    def ppo(self) -> PPO:
        model = self.model
        if not isinstance(model, PPO) or not isinstance(model.policy, ActorCriticPolicy):
            raise TypeError(
                f"InfluenceFilter needs stable_baselines3.PPO with an actor-critic policy, not "
                f"{type(model).__module__.split('.')[0]}.{type(model).__name__} (recurrent policies and "
                "sb3-contrib's algorithms are not supported)"
            )
        return model

    def _init_callback(self) -> None:
        # Everything that cannot work is refused when learning starts, before the first rollout.
        ppo = self.ppo
        check_action_space(ppo.action_space)
        if self.mode == "none" or isinstance(ppo.rollout_buffer, IIFRolloutBuffer):
            return
        if type(ppo.rollout_buffer) not in STOCK_BUFFERS:
            raise TypeError(
                f"mode={self.mode!r} needs the model's rollout buffer to be SB3's RolloutBuffer or "
                f"DictRolloutBuffer (the callback swaps in IIFRolloutBuffer) or IIFRolloutBuffer, not "
                f"{type(ppo.rollout_buffer).__name__}"
            )
        # The callback alone suffices (rl-zoo's YAML cannot name a buffer class, only callbacks): the stock buffer,
        # which the next rollout resets anyway, is replaced by the IIF one built as PPO._setup_model built it. The
        # model's rollout_buffer_class stays SB3's, so a saved model loads where rlinfluence is not installed.
        ppo.rollout_buffer = IIFRolloutBuffer(
            ppo.n_steps,
            ppo.observation_space,
            ppo.action_space,
            device=ppo.device,
            gamma=ppo.gamma,
            gae_lambda=ppo.gae_lambda,
            n_envs=ppo.n_envs,
            **ppo.rollout_buffer_kwargs,
        )

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        ppo = self.ppo
        policy, buffer = ppo.policy, ppo.rollout_buffer
        assert isinstance(policy, ActorCriticPolicy)  # self.ppo checked it
        records = sb3_records(buffer, ppo.action_space, policy.device)
        # SB3's clip range is a schedule of the training progress (read at the progress so far). At θ_k the
        # ratio is 1 and the clip inactive, so its value matters only through float differences of log π_old.
        clip_range = ppo.clip_range(ppo._current_progress_remaining) if callable(ppo.clip_range) else ppo.clip_range
        attribute = partial(
            record_influence,
            *sb3_policy(policy),
            records,
            clip_range=float(clip_range),
            ent_coef=float(ppo.ent_coef),
            chunk_size=self.chunk_size,
        )
        scores = attribute(self.target, target_state=self.target_state, target_action=self.target_action)
        dropped = drop_set(scores, self.p, self.mode, self.rng, attribute=attribute)
        if isinstance(buffer, IIFRolloutBuffer) and self.mode != "none":
            buffer.drop(dropped)
        self._record(scores, dropped)

    def _record(self, scores: np.ndarray, dropped: np.ndarray) -> None:
        summary = {
            "n_records": len(scores),
            "n_negative": int((scores < 0).sum()),
            "n_dropped": len(dropped),
            "n_kept": len(scores) - len(dropped),
            "dropped_fraction": len(dropped) / len(scores),  # of the rollout (p is a percent of its negatives)
            "score_mean": float(scores.mean()),
            "score_min": float(scores.min()),
            "score_max": float(scores.max()),
        }
        for key, value in summary.items():
            self.logger.record(f"influence/{key}", value)
        self.rounds.append({"round": len(self.rounds) + 1, **summary, "scores": scores, "dropped": dropped})
