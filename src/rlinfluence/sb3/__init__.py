"""IIF for stock stable-baselines3 PPO, through its public hooks only (needs the `sb3` extra):

    model = PPO("MlpPolicy", env)
    model.learn(100_000, callback=InfluenceFilter(mode="iif", p=50))  # swaps in IIFRolloutBuffer

(or `PPO(..., rollout_buffer_class=IIFRolloutBuffer)` from the start; rl-zoo's YAML names only the callback).

At each rollout's end (after SB3's GAE) the callback scores every record at the policy that collected
it (rlinfluence.attribution) and tells the buffer which records the update's minibatches skip.
"""

try:  # first: the modules below subclass its classes, and a user is told what to install, not where it failed
    import stable_baselines3  # noqa: F401
except ModuleNotFoundError as missing:
    if missing.name != "stable_baselines3":
        raise
    raise ModuleNotFoundError(
        "rlinfluence.sb3 needs stable-baselines3, which is not installed here: pip install 'rlinfluence[sb3]'",
        name=missing.name,
    ) from None

from rlinfluence.sb3.buffer import IIFDictRolloutBuffer, IIFRolloutBuffer
from rlinfluence.sb3.callback import InfluenceFilter, sb3_records
from rlinfluence.sb3.policy import sb3_policy

__all__ = ["IIFDictRolloutBuffer", "IIFRolloutBuffer", "InfluenceFilter", "sb3_policy", "sb3_records"]

# A saved model pickles the classes it was built with by their path: record the public one, not the module
# that happens to define them (rlinfluence.sb3.buffer), so a model loads whatever the files become.
for _public in (IIFRolloutBuffer, IIFDictRolloutBuffer, InfluenceFilter):
    _public.__module__ = __name__
del _public
