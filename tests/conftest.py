"""Shared test helpers: compose the real Hydra config (as the CLI does) with tiny budgets (debug=smoke), read
a run's metrics.csv, and check that a command is refused in one line."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
for _offline in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):  # tests never touch the Hub
    os.environ.setdefault(_offline, "1")

from rlinfluence.kernels import pin_kernels  # noqa: E402

pin_kernels()  # before torch loads, as the CLI's entry does: the runs the tests make are the runs it makes

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

import rlinfluence.config.schema  # noqa: E402,F401  (registers the schema conf/config.yaml starts from)
from rlinfluence.analyses.bottom_frames import frames_bytes  # noqa: E402
from rlinfluence.choices import ConfigError  # noqa: E402
from rlinfluence.config.paths import CONFIG_DIR  # noqa: E402
from rlinfluence.control.collect import Rollout, rollout_records  # noqa: E402
from rlinfluence.control.stacked_networks import StackedActorCritic  # noqa: E402
from rlinfluence.control.stacked_update import update_seeds  # noqa: E402
from rlinfluence.figures.analysis_data import documented_identities  # noqa: E402
from rlinfluence.figures.arms import iif_p  # noqa: E402
from rlinfluence.figures.bottom_frames import FRAMES_ROUND  # noqa: E402
from rlinfluence.figures.catalogue import OUTPUTS  # noqa: E402
from rlinfluence.figures.gather import identity_path  # noqa: E402
from rlinfluence.run.checkpoint import METRICS  # noqa: E402
from rlinfluence.validation import validate  # noqa: E402

# The language-model path's tiny world, built in seconds (the preset's pretraining is longer), small rounds.
LM_TINY = [
    "env=toxicity_tiny",
    "model.tiny.pretrain_steps=40",
    "model.tiny.corpus_sentences=400",
    "env.n_steps=16",
    "env.lm.val_size=8",
    "eval.episodes=8",
    "env.rounds=3",
    "ppo.batch_size=4",
    "logger=disabled",
    "progress=false",
]
LM_GRPO = ["env.lm.algorithm=grpo", "env.lm.grpo.group_size=4"]  # with LM_TINY: 4 groups of 4 a round, 2 of 4 val


@pytest.fixture(scope="module")
def tiny_lm_cache(tmp_path_factory):
    """A module's tests build (once) and read the tiny LM world from a fresh cache, never the user's."""
    cache = tmp_path_factory.mktemp("rlinfluence-cache")
    previous = os.environ.get("RLINFLUENCE_CACHE")
    os.environ["RLINFLUENCE_CACHE"] = str(cache)
    yield cache
    if previous is None:
        del os.environ["RLINFLUENCE_CACHE"]
    else:
        os.environ["RLINFLUENCE_CACHE"] = previous


def compose_config(overrides: list[str], return_hydra_config: bool = False):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=return_hydra_config)


@pytest.fixture(scope="module")
def one_thread():
    """A run's torch threads (`torch_threads`, 1 by default): with 2, the stacked seeds' slices round differently
    with N, and small forwards run slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_config():
    """`rlinfluence debug=smoke <overrides>`: a 2-round run in about a second (conf/debug/smoke.yaml)."""
    return lambda *overrides: compose_config(["debug=smoke", *overrides])


def one_network_update(model, optimizer, buffer, selection, ppo, rng, on_step=None) -> dict[str, float]:
    """The control engine's PPO update (control/stacked_update.py) of one network and its optimizer, outside a run: a
    stack of one, its weights and optimizer state written back as a round's update leaves them. `on_step` is called at
    θ_j with `model` holding θ_j, as a run's every-step influence is."""
    stack = StackedActorCritic([model])
    hook = None
    if on_step is not None:

        def hook(ids, advantages):
            model.load_state_dict(stack.seed_state_dict(0))
            on_step(ids, advantages)

    name = "adam" if isinstance(optimizer, torch.optim.Adam) else "sgd"
    lr = optimizer.param_groups[0]["lr"]
    [stats] = update_seeds(stack, [(model, optimizer)], name, lr, [buffer], [selection], ppo, [rng], [hook])
    return stats


@torch.no_grad()
def one_network_rollout(model, envs, n_steps: int, gamma: float, gae_lambda: float, generator):
    """One network's rollout of `envs` outside a run (control/collect.py's Rollout): each step's actions sampled by
    `model` from noise drawn on `generator`, the records computed by `model`."""
    noise = model.action_head.draw_noise((n_steps, len(envs.envs)), generator)
    rollout = Rollout([envs], n_steps, noise.unsqueeze(1))  # a stack of one seed
    for t in range(n_steps):
        rollout.act(t, model.sample_actions(rollout.observe(t)[0], noise[t])[None])
    [buffer] = rollout_records(rollout, [rollout.scored(0, model, gamma)], gamma, gae_lambda)
    return buffer


def metrics_rows(run_dir: Path, timings: bool = True) -> list[dict[str, str]]:
    """A run's metrics.csv, one row of strings (as written) per round; without `timings`, less the time_*
    columns, the wall-clock seconds that differ between two runs of the same settings."""
    with open(Path(run_dir) / METRICS, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return rows if timings else [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]


def refusal(action: Callable[[], object], error: type[Exception] = ConfigError) -> str:
    """The message of the `error` that `action` stops with, asserted to be one line."""
    with pytest.raises(error) as raised:
        action()
    message = str(raised.value)
    assert "\n" not in message, message
    return message


def config_refusal(*overrides: str) -> str:
    """The one-line ConfigError that validation refuses `rlinfluence <overrides>` with."""
    return refusal(lambda: validate(compose_config(list(overrides))))


def cli_refusal(result: subprocess.CompletedProcess) -> str:
    """The one line a refused command printed, asserted with its exit code 2."""
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    return line


# f_action's s* on FrozenLake: the start state, one-hot (target=action needs one).
FROZENLAKE_STATE_0 = "target.state=[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"


# The hint that ends the refusal of an env id whose spaces do not fit the preset (control/fit.py).
FIT_HINT = (
    "; use a preset whose spaces fit, or override env.make_kwargs/env.wrappers; for another Gymnasium env use "
    "env=gym env.id=<id>"
)


def tiny(runs_root: Path, *overrides: str):
    """`rlinfluence debug=smoke <overrides>` with its runs under `runs_root`."""
    return compose_config(["debug=smoke", f"runs_root={runs_root}", *overrides])


def rounds_in(path: Path) -> list[int]:
    """The rounds a run's metrics.csv has rows for, in order."""
    return [int(row["round"]) for row in metrics_rows(path)]


def start_as_from_a_terminal(command: list[str], **popen) -> subprocess.Popen:
    """`command` started where Ctrl-C (SIGINT) reaches it, as from a terminal: a shell without job control starts
    its background jobs (pytest, say) with SIGINT ignored, and a child keeps what it inherits."""
    return subprocess.Popen(command, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)


def cli_run(runs_root: Path, *overrides: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`rlinfluence <overrides>` in a subprocess, quiet, its runs under `runs_root`."""
    return subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "rlinfluence",
            *overrides,
            f"runs_root={runs_root}",
            "logger=disabled",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def write_analyses(data_dir) -> None:
    """Random rows in the shape task=diagnose, task=intervene, task=counterfactual, task=timeline and task=bottom_frames
    write, for every env a figure reads."""
    rng = np.random.default_rng(0)
    for seed in range(3):
        for env in ("frozenlake", "minigrid"):
            rows = [
                {
                    "env": env,
                    "seed": seed,
                    "round": k,
                    "record": i,
                    "rank": i + 1,
                    "influence": -i,
                    "state": int(rng.integers(16)),
                    "action": int(rng.integers(4)),
                    "advantage_gae": rng.normal(),
                    "advantage_true": rng.normal(),
                    "advantage_true_se": 0.01,
                }
                for k in (2, 5, 10)
                for i in range(150)
            ]
            (data_dir / "analyses" / "diagnose").mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(data_dir / "analyses" / "diagnose" / f"{env}-seed{seed}.csv", index=False)
        for env in ("frozenlake", "acrobot", "minigrid", "lunarlander"):
            rows = [
                {"env": env, "seed": seed, "round": k, "arm": arm, "test_return": rng.normal()}
                for k in range(1, 6)
                for arm in ("all", "influence", "random")
            ]
            (data_dir / "analyses" / "intervene").mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(data_dir / "analyses" / "intervene" / f"{env}-seed{seed}.csv", index=False)
            at_p = pd.DataFrame(rows).assign(p=iif_p(env))  # analysis.intervene.p at the env's IIF p
            at_p.to_csv(data_dir / "analyses" / "intervene" / f"{env}-seed{seed}-p{iif_p(env):g}.csv", index=False)
            groups = (
                [("none", 0.0)]
                + [("random", size) for size in (0.01, 0.05, 0.2, 0.5) for _ in range(10)]
                + [("iif", 0.2), ("all_negative", 0.4)]
            )
            rows = [
                {
                    "env": env,
                    "seed": seed,
                    "round": 5,
                    "kind": kind,
                    "size": size,
                    "group": i,
                    "predicted_plain": rng.normal(),
                    "predicted_centred": rng.normal(),
                    "actual": rng.normal(),
                    "test_change": rng.normal(),
                }
                for i, (kind, size) in enumerate(groups)
            ]
            (data_dir / "analyses" / "counterfactual").mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(data_dir / "analyses" / "counterfactual" / f"{env}-seed{seed}.csv", index=False)
    for env, obs_dim in (("acrobot", 6), ("highway", 25)):  # task=timeline: one seed, top records per round
        rows = [
            {
                "env": env,
                "seed": 0,
                "round": k,
                "pi_target": k / 13,
                "roughness": rng.uniform(0, 0.01),
                "n_positive": 1000,
                "n_records": 2048,
                "target_state": str([0.5] * obs_dim),
                "target_action": 0,
                "rank": i + 1,
                "record": i,
                "influence": 10.0 - i,
                "action": int(rng.integers(3)),
                "advantage_gae": rng.normal(),
                "embedding_distance": rng.uniform(),
                **{f"obs_{d}": rng.normal() for d in range(obs_dim)},
            }
            for k in range(1, 13)
            for i in range(5)
        ]
        (data_dir / "analyses" / "timeline").mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(data_dir / "analyses" / "timeline" / f"{env}-seed0.csv", index=False)
    # task=bottom_frames on Pong: one seed, the 10 records of lowest influence with their stacked frames
    rows = pd.DataFrame(
        {
            "env": "pong",
            "seed": 0,
            "round": FRAMES_ROUND,
            "n_records": 1024,
            "rank": 1024 - np.arange(10),
            "record": np.arange(10),
            "influence": np.arange(-10.0, 0.0),
            "action": np.arange(10) % 6,
            "advantage_gae": rng.normal(size=10),
            "obs": list(rng.integers(0, 256, (10, 4, 84, 84), dtype=np.uint8)),
        }
    )
    (data_dir / "analyses" / "bottom_frames").mkdir(parents=True, exist_ok=True)
    (data_dir / "analyses" / "bottom_frames" / "pong-seed0.npz").write_bytes(frames_bytes(rows))
    for path, identity in documented_identities(data_dir, OUTPUTS).items():  # as if made by the documented commands
        identity_path(path).write_text(json.dumps(identity))


def analysis_output(runs_root, analysis: str, suffix: str = ".csv"):
    """The one output of `analysis` an analysis task wrote beside its standard run: (its path, identity)."""
    [path] = Path(runs_root).rglob(f"analyses/{analysis}*{suffix}")
    return path, json.loads(identity_path(path).read_text())


def lm_rows(experiment: str, env: str, model: str, rounds: int = 4, seeds: int = 3) -> pd.DataFrame:
    """Rows in the shape of the language-model runs' tidy CSV (figures/rlhf.py): every arm of Fig. 7, Fig. 16
    and Table 6 (and of the GRPO study, figures/grpo.py); IIF keeps half the records and halves the update time."""
    rng = np.random.default_rng(0)
    rows = []
    for method, target in (("ppo", "seq"), ("iif", "seq"), ("random", "seq"), ("iif", "return")):
        for seed in range(seeds):
            for k in range(rounds + 1):
                rows.append(
                    {
                        "experiment": experiment,
                        "env": env,
                        "model": model,
                        "method": method,
                        "method_tag": method if method == "ppo" else f"{method}-p100",
                        "target": target,
                        "config_hash": "default",
                        "seed": seed,
                        "round": k,
                        "train_return": k * 0.1 + rng.normal(0, 0.01),
                        "test_return": rng.normal(),
                        "test_toxicity": 0.5 - 0.05 * k,
                        "n_records": 64,
                        "n_kept": 64 if method == "ppo" else 32,
                        "time_collect": 0.5,
                        "time_forward": 0.2,
                        "time_influence": 0.0 if method == "ppo" else 1.0,
                        "time_update": 3.0 if method == "ppo" else 1.0,
                        "time_eval": 0.4,
                    }
                )
    return pd.DataFrame(rows)


def write_authors_runs(data_dir) -> None:
    """paper_figures/data/authors.csv as benchmarks/authors_pipeline/convert.py writes it: rounds 0-3 of
    5 seeds of both arms on the authors' two envs, tested at our committed runs' episodes (MiniGrid 100,
    LunarLander 50); their IIF tests exactly as their standard PPO does. And authors_eval_noise.csv: MiniGrid
    seed 0 at their scripts' 1,000 episodes, where IIF tests 0, 2, 3, 3 against standard PPO's 0, 1, 2, 3."""
    from rlinfluence.figures.runs import TIDY_COLUMNS

    def rows(experiment, envs, seeds, episodes, iif_curve=None):
        return [
            {
                "experiment": experiment,
                "env": env,
                "method": method,
                "method_tag": tag,
                "p": p,
                "optimizer": "sgd",
                "protocol": "authors",
                "config_hash": f"abc12{episodes[env] % 7}",
                "seed": seed,
                "round": k,
                "env_steps": 2048 * k,
                "test_return": iif_curve[k] if method == "iif" and iif_curve else k + 10 * seed,
                "n_records": 2048 * (k > 0),
                "n_kept": 1900,
                "source": "authors",
                "test_episodes": episodes[env],
            }
            for env in envs
            for method, tag, p in (("ppo", "ppo", None), ("iif", "iif-p12.5", 12.5))
            for seed in seeds
            for k in range(4)
        ]

    columns = TIDY_COLUMNS + ["source", "test_episodes"]
    committed = rows("authors", ("minigrid", "lunarlander"), range(5), {"minigrid": 100, "lunarlander": 50})
    pd.DataFrame(committed).reindex(columns=columns).to_csv(data_dir / "authors.csv", index=False)
    noise = rows("authors_eval_noise", ("minigrid",), [0], {"minigrid": 1000}, [0.0, 2.0, 3.0, 3.0])
    pd.DataFrame(noise).reindex(columns=columns).to_csv(data_dir / "authors_eval_noise.csv", index=False)


def write_sb3_runs(data_dir) -> None:
    """paper_figures/data/sb3.csv as benchmarks/sb3_iif_study.py writes it: rounds 0-3 of 5 seeds of
    stock SB3 PPO (returns 0, 1, 2, 3) and SB3 + IIF (0, 2, 3, 3: levels 1, 2, 3 at rounds 1, 1, 2) on
    FrozenLake (p = 50) and LunarLander (p = 12.5); and the study without gradient clipping, whose IIF tests as its
    stock SB3 does (SE 0), with settings (a config_hash) of its own."""
    from rlinfluence.figures.runs import TIDY_COLUMNS
    from rlinfluence.figures.sb3_dropin import SB3, SB3_NO_CLIPPING

    returns = {"ppo": [0.0, 1.0, 2.0, 3.0], "iif": [0.0, 2.0, 3.0, 3.0]}
    variants = {SB3: ("abc456", returns), SB3_NO_CLIPPING: ("abc789", dict(returns, iif=returns["ppo"]))}
    rows = [
        {
            "experiment": "sb3",
            "env": env,
            "method": method,
            "method_tag": method if method == "ppo" else f"iif-p{p:g}",
            "p": p if method != "ppo" else None,
            "optimizer": "sgd",
            "protocol": protocol,
            "config_hash": config_hash,
            "seed": seed,
            "round": k,
            "env_steps": 2048 * k,
            "test_return": curves[method][k],
            "n_records": 2048 * (k > 0),
            "n_kept": 0 if k == 0 else 2048 if method == "ppo" else 1024,
            "test_episodes": 100,
        }
        for protocol, (config_hash, curves) in variants.items()
        for env, p in (("frozenlake", 50.0), ("lunarlander", 12.5))
        for method in returns
        for seed in range(5)
        for k in range(4)
    ]
    pd.DataFrame(rows).reindex(columns=TIDY_COLUMNS + ["test_episodes"]).to_csv(data_dir / "sb3.csv", index=False)


def write_lm_runs(data_dir) -> None:
    """The language-model runs' CSV with every run the RLHF outputs need, paper scale and tiny world, and the
    GRPO study's and the planted-data study's (5 seeds of each drop_baseline's and fraction's experiment)."""
    from rlinfluence.figures.rlhf import LM_CSV

    (data_dir / LM_CSV).parent.mkdir(parents=True, exist_ok=True)
    pd.concat(
        [
            lm_rows("rlhf", "toxicity", "gpt_neo_2p7b"),
            lm_rows("rlhf_tiny", "toxicity_tiny", "tiny"),
            lm_rows("grpo", "toxicity", "gpt_neo_2p7b"),
            *(
                lm_rows(f"grpo_tiny_{baseline}", "toxicity_tiny", "tiny", seeds=5)
                for baseline in ("collected", "recompute")
            ),
            *(lm_rows(f"corruption_lm_tiny_{fraction}", "toxicity_tiny", "tiny", seeds=5) for fraction in (0.0, 0.1)),
        ]
    ).to_csv(data_dir / LM_CSV, index=False)
