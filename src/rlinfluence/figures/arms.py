"""The arms outputs compare: a curve in a figure, a method in a table, as its runs' method tag names it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rlinfluence.config.compose import ANY_ENV, preset
from rlinfluence.run.rundir import any_env_id


def iif_p(env: str) -> float:
    """The env's IIF p (its preset's env.p), the share of negative records an IIF round drops; the
    baselines that drop records drop as many. An env=gym run's env (`gym-<id>`, rundir.env_folder) has env=gym's."""
    return float(preset(ANY_ENV if any_env_id(env) is not None else env).env.p)


@dataclass(frozen=True)
class Arm:
    """`tag` is its runs' method_tag, where "{p}" stands for the env's IIF p (`iif_p`)."""

    label: str
    tag: str
    overlay: str | None = None  # the overlay that makes its runs, when not the output's (a baseline shared with it)

    def tag_for(self, env: str) -> str:
        return self.tag.format(p=format(iif_p(env), "g"))


STANDARD = Arm("Standard PPO", "ppo")
IIF = Arm("IIF", "iif-p{p}")
RANDOM = Arm("Random", "random-p{p}")
ADVANTAGE_H1 = Arm("Advantage H1", "advantage-h1-p{p}")
ADVANTAGE_H2 = Arm("Advantage H2", "advantage-h2-p{p}")
TD_ERROR = Arm("TD-error reweighting", "td_error")
# Beyond the paper (robust IIF, selection.py): the entropy guard, p=auto, and both.
IIF_GUARD = Arm("IIF + entropy guard", "iif_guard-p{p}")
IIF_AUTO = Arm("IIF, p = auto", "iif-pauto")
IIF_GUARD_AUTO = Arm("IIF + entropy guard, p = auto", "iif_guard-pauto")
ROBUST_ARMS = (IIF_GUARD, IIF_AUTO, IIF_GUARD_AUTO)
# Beyond the paper (the benchmark of rollout filters, figures/filters.py): random at 25 %, gradient consensus, and
# IIF and consensus dropping whole episodes (method.granularity=episode).
RANDOM_25 = Arm("Random 25 %", "random-p25")
CONSENSUS = Arm("Consensus", "consensus-p{p}")
IIF_EPISODES = Arm("IIF, episodes", "iif-ep-p{p}")
CONSENSUS_EPISODES = Arm("Consensus, episodes", "consensus-ep-p{p}")
# The p ablation's arms (+experiment=p_ablation sweeps the same p).
ABLATION_PS = (6.25, 12.5, 25.0, 50.0, 100.0)
IIF_AT_P = tuple(Arm(f"IIF p = {p:g} %", f"iif-p{p:g}") for p in ABLATION_PS)
# Beyond the paper: IIF under Adam with the influence Adam's step implies (influence.preconditioner=adam),
# beside Table 3's IIF with plain influence; both against the same standard PPO runs.
ADAM_ARMS = (
    replace(STANDARD, overlay="adam"),
    Arm("IIF, plain influence", IIF.tag, "adam"),
    Arm("IIF, Adam-preconditioned influence", IIF.tag),
)
