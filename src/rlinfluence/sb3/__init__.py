"""IIF for stock stable-baselines3 PPO, through its public hooks only (needs the `sb3` extra):

    model = PPO("MlpPolicy", env)
    model.learn(100_000, callback=InfluenceFilter(mode="iif", p=50))  # swaps in IIFRolloutBuffer

(or `PPO(..., rollout_buffer_class=IIFRolloutBuffer)` from the start; rl-zoo's YAML names only the callback).

At each rollout's end (after SB3's GAE) the callback scores every record at the policy that collected
it (rlinfluence.attribution) and tells the buffer which records the update's minibatches skip.
"""

from rlinfluence.sb3.buffer import IIFRolloutBuffer
from rlinfluence.sb3.callback import InfluenceFilter, sb3_records

__all__ = ["IIFRolloutBuffer", "InfluenceFilter", "sb3_records"]
