"""The twenty-seed leaderboard (figures/twenty_seeds.py) and its paired statistics (metrics.paired_comparison): on
synthetic seeds whose answer is known, a filter that beats standard PPO on every seed is decided with P = 1,
identical arms tie, and one collapsed seed moves the mean but not P(>)."""

from __future__ import annotations

import filecmp
import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rlinfluence import metrics
from rlinfluence.config.compose import composed, search_path
from rlinfluence.figures import twenty_seeds
from rlinfluence.figures.arms import ADAM_ARMS, IIF, STANDARD, iif_p
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.regenerate import regenerate
from rlinfluence.figures.runs import read_experiment
from rlinfluence.run.rundir import method_tag
from test_figures import write_run

SEEDS = 20
NAME = "twenty_seeds_leaderboard"
STACKED_HASH = "4739bc"  # engine=stacked's, the study's runs' one non-default setting
BASE = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # standard PPO's curve, plus 0.1·seed
# Each arm's change from standard PPO's curve on rounds 1..4, per seed (round 0 is the shared initial policy):
GAINS = {
    "iif-p50": lambda seed: 1 + 0.01 * seed,  # better on every seed, by a different margin each
    "consensus-p50": lambda seed: 0.0,  # the same curve: a tie on every seed
    "random-p50": lambda seed: -0.1 if seed == 0 else 0.5 + 0.01 * seed,  # seed 0 a little worse
    "random-p25": lambda seed: -100.0 if seed == 0 else 0.5 + 0.01 * seed,  # seed 0 collapsed: ends below round 0
    "iif-ep-p50": lambda seed: -1 - 0.01 * seed,  # worse on every seed
    "consensus-ep-p50": lambda seed: 0.0,
}


def study_curve(tag: str, seed: int) -> list[float]:
    gain = GAINS[tag](seed) if tag in GAINS else 0.0
    return list(BASE + 0.1 * seed + np.r_[0.0, np.full(BASE.size - 1, gain)])


def write_study(root, envs=("frozenlake",), seeds: int = SEEDS, arms=twenty_seeds.ARMS) -> None:
    """`arms`' runs of each block in `envs`, where the block's settings put them (its env and optimizer)."""
    for block in envs:
        env, optimizer = twenty_seeds.block_source(block)
        for arm in arms:
            tag = arm.tag_for(env)
            for seed in range(seeds):
                curve = study_curve(tag, seed)
                write_run(
                    root, "twenty_seeds", env, tag, seed, curve=curve, config_hash=STACKED_HASH, optimizer=optimizer
                )


def results_of(root) -> dict[str, tuple[str, str]]:
    return {name: (status, why) for name, status, why in regenerate(root / "data", root / "out", root / "runs")}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """FrozenLake's 140 runs (acrobot's none), regenerated once: (root, results)."""
    root = tmp_path_factory.mktemp("twenty")
    write_study(root / "runs")
    return root, results_of(root)


def sections(root) -> dict[str, pd.DataFrame]:
    """The written Markdown's tables by their section's heading, as strings."""
    parts = (root / "out" / f"{NAME}.md").read_text().split("\n## ")[1:]
    tables = {}
    for part in parts:
        lines = [line for line in part.splitlines() if line.startswith("|")]
        cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
        tables[part.splitlines()[0]] = pd.DataFrame(cells[2:], columns=cells[0])
    return tables


def paired(root) -> pd.DataFrame:
    return sections(root)["FrozenLake: paired by seed"].set_index(["Method", "Against"])


def per_arm(root) -> pd.DataFrame:
    return sections(root)["FrozenLake: per arm"].set_index("Method")


# ---------------------------------------------------------------- the statistics


def test_a_method_better_on_every_seed_has_p_one_and_the_smallest_exact_p_values():
    y = np.arange(SEEDS, dtype=float)
    result = metrics.paired_comparison(y + 1 + 0.01 * y, y)
    assert result.superiority == (1.0, 1.0, 1.0, SEEDS)  # every seed agrees: the bootstrap CI is a point
    # Only the observed signs and their mirror image reach the observed |sum| and the largest rank sum.
    assert result.wilcoxon_p == pytest.approx(2 / 2**SEEDS)
    assert result.sign_flip_p == pytest.approx(2 / 2**SEEDS)
    assert result.difference.low > 0


def test_identical_arms_tie_with_p_one_and_no_difference():
    y = np.linspace(0, 1, SEEDS)
    result = metrics.paired_comparison(y, y)
    assert result.superiority == (0.5, 0.5, 0.5, SEEDS)
    assert (result.wilcoxon_p, result.sign_flip_p) == (1.0, 1.0)
    assert result.difference == (0.0, 0.0, 0.0, SEEDS)


def test_one_collapsed_seed_moves_the_mean_but_not_p():
    y = np.zeros(SEEDS)
    gains = 0.5 + 0.01 * np.arange(SEEDS)
    slightly, collapsed = gains.copy(), gains.copy()
    slightly[0], collapsed[0] = -0.1, -100.0
    a, b = metrics.paired_comparison(slightly, y), metrics.paired_comparison(collapsed, y)
    assert a.superiority == b.superiority and a.superiority.mean == 0.95
    assert a.wilcoxon_p < b.wilcoxon_p < 0.01  # its rank, not its size, enters the signed-rank test
    assert b.difference.mean == pytest.approx(a.difference.mean - 99.9 / SEEDS)
    assert b.sign_flip_p > 0.5 > 0.001 > a.sign_flip_p


def test_the_exact_sign_flip_test_counts_every_flip():
    differences = np.array([0.3, -0.1, 0.7, 0.2, 0.5])
    sums = [abs(np.dot(signs, differences)) for signs in itertools.product((1, -1), repeat=differences.size)]
    expected = np.mean(np.array(sums) >= abs(differences.sum()) - 1e-12)
    assert metrics.sign_flip_test(differences) == pytest.approx(expected) == 4 / 32


def test_beyond_twenty_seeds_the_sign_flips_are_sampled_from_a_fixed_seed():
    differences = np.r_[np.full(24, 0.1), -0.05]
    p = metrics.sign_flip_test(differences)
    assert p == metrics.sign_flip_test(differences)  # byte-identical on rerun
    assert 1 / (1 + metrics.SIGN_FLIP_SAMPLES) <= p < 0.001


def test_the_wilcoxon_test_is_scipys_exact_one_dropping_ties():
    differences = np.array([0.0, 0.3, -0.1, 0.7, 0.2, 0.5, 0.0, 0.4])
    expected = stats.wilcoxon(differences[differences != 0], method="exact").pvalue
    assert metrics.wilcoxon_exact(differences) == pytest.approx(expected)


def test_benjamini_hochberg_adjusts_the_ranked_p_values():
    q = metrics.benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    # ranked 0.01, 0.03, 0.04, 0.5: p·m/rank = 0.04, 0.04, 0.0533, 0.5, then the running minimum from the top
    np.testing.assert_allclose(q, [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])


@pytest.mark.parametrize(
    "q, low, high, null, expected",
    [
        (0.01, 0.6, 0.9, 0.5, "decided: better"),
        (0.01, -2.0, -1.0, 0.0, "decided: worse"),
        (0.01, 0.4, 0.9, 0.5, "tie at 20 seeds"),  # the test decides, the CI does not
        (0.2, 0.6, 0.9, 0.5, "tie at 20 seeds"),  # the CI decides, the test does not
        (0.01, float("nan"), float("nan"), 0.0, "tie at 20 seeds"),
    ],
)
def test_a_question_is_decided_only_when_its_test_and_its_ci_agree(q, low, high, null, expected):
    assert twenty_seeds.verdict(q, low, high, null, SEEDS) == expected


# ---------------------------------------------------------------- the output


def test_an_env_is_drawn_once_every_arm_has_its_seeds_the_others_are_listed_with_their_command(study):
    root, results = study
    status, written = results[NAME]
    assert status == "partial" and written.endswith(f"{NAME}.tex")
    missing = (root / "out" / "MISSING.md").read_text()
    assert "- twenty_seeds/acrobot: needs 20 seeds run by every arm, has 0 in common" in missing
    assert (
        "`rlinfluence -m +experiment=twenty_seeds env=minigrid eval.episodes=100 engine=stacked "
        "seed='range(20)'`" in missing
    )
    assert (  # Pendulum through env=gym: the settings declared before its runs, not a preset's
        "- twenty_seeds/gym-Pendulum-v1: needs 20 seeds run by every arm, has 0 in common (finished seeds per run "
        "name: ppo 0, iif-p50 0" in missing
    )
    assert (
        "`rlinfluence -m +experiment=twenty_seeds env=gym env.id=Pendulum-v1 env.n_envs=4 env.n_steps=1024 "
        "env.rounds=25 ppo.gamma=0.9 " in missing
    )
    index = (root / "out" / "INDEX.md").read_text()
    assert "## Which filter? Twenty seeds (`twenty_seeds_leaderboard`)" in index
    assert (
        "Environments: frozenlake. Runs: `rlinfluence -m +experiment=twenty_seeds env=frozenlake engine=stacked "
        in index
    )
    data = root / "data"
    assert sorted(p.name for p in data.glob("twenty_seeds.*")) == sorted(  # one CSV per env and arm
        f"twenty_seeds.frozenlake.{arm.tag_for('frozenlake')}.csv" for arm in twenty_seeds.ARMS
    )
    tidy = read_experiment(data, "twenty_seeds")
    assert tidy.groupby("method_tag")["seed"].nunique().to_dict() == {
        arm.tag_for("frozenlake"): 20 for arm in twenty_seeds.ARMS
    }
    assert len(tidy) == 140 * BASE.size


def test_a_filter_better_on_every_seed_is_decided_and_identical_arms_tie(study):
    root, _ = study
    assert list(sections(root)) == [
        "FrozenLake: paired by seed",
        "FrozenLake: per arm",
        "The decision rule under no difference",
    ]
    rows = paired(root)
    iif = rows.loc["IIF", "Standard PPO"]
    assert iif["Seeds"] == "20"
    assert iif["P(>) [95 % CI]"] == "1.00 [1.00, 1.00]"
    assert (iif["Typical seed"], iif["Expected outcome"]) == ("decided: better", "decided: better")
    assert iif["Wilcoxon p (BH q)"].startswith("1.9e-06 (q ")
    consensus = rows.loc["Consensus", "Standard PPO"]
    assert consensus["P(>) [95 % CI]"] == "0.50 [0.50, 0.50]"
    assert consensus["Mean AUC difference [95 % CI]"] == "+0.000 [+0.000, +0.000]"
    assert consensus["Wilcoxon p (BH q)"] == "1.000 (q 1.000)"
    assert (consensus["Typical seed"], consensus["Expected outcome"]) == ("tie at 20 seeds", "tie at 20 seeds")
    episodes = rows.loc["IIF, episodes", "Standard PPO"]
    assert episodes["P(>) [95 % CI]"] == "0.00 [0.00, 0.00]"
    assert (episodes["Typical seed"], episodes["Expected outcome"]) == ("decided: worse", "decided: worse")
    # head to head: IIF beats consensus (standard PPO's curve) and random on every seed
    assert rows.loc["IIF", "Consensus"]["P(>) [95 % CI]"] == "1.00 [1.00, 1.00]"
    assert rows.loc["IIF", "Random, as many as IIF"]["Typical seed"] == "decided: better"


def test_one_collapsed_seed_moves_the_mean_but_not_p_and_counts_as_failed(study):
    root, _ = study
    rows = paired(root)
    slightly = rows.loc["Random, as many as IIF", "Standard PPO"]
    collapsed = rows.loc["Random, 25 % of negatives", "Standard PPO"]
    assert slightly["P(>) [95 % CI]"] == collapsed["P(>) [95 % CI]"]
    assert slightly["P(>) [95 % CI]"].startswith("0.95 [")
    assert slightly["Typical seed"] == collapsed["Typical seed"] == "decided: better"
    assert slightly["Mean AUC difference [95 % CI]"].startswith("+0.565 [")  # (19·0.5 + 0.01·190 − 0.1) / 20
    assert collapsed["Mean AUC difference [95 % CI]"].startswith("-4.430 [")  # (19·0.5 + 0.01·190 − 100) / 20
    assert (slightly["Expected outcome"], collapsed["Expected outcome"]) == ("decided: better", "tie at 20 seeds")
    arms = per_arm(root)
    assert arms.loc["Random, 25 % of negatives", "Failed / seeds"] == "1 / 20"
    assert arms.loc["Random, 25 % of negatives", "Failed seeds"] == "0"
    assert arms.loc["IIF", "Failed / seeds"] == "0 / 20"
    assert arms.loc["IIF", "SE_ave (%) median"] != "—" and arms.loc["Standard PPO", "SE_ave (%) mean ± std"] == "—"


def test_the_leaderboard_redraws_byte_identical(study, tmp_path):
    root, _ = study
    regenerate(root / "data", tmp_path)
    for suffix in (".md", ".tex"):
        assert filecmp.cmp(root / "out" / f"{NAME}{suffix}", tmp_path / f"{NAME}{suffix}", shallow=False)


def test_without_every_seed_of_every_arm_the_env_is_missing(tmp_path):
    write_study(tmp_path / "runs", seeds=19)
    status, why = results_of(tmp_path)[NAME]
    assert status == "missing" and "twenty_seeds/frozenlake: needs 20 seeds run by every arm, has 19 in common" in why


def test_an_env_with_some_arms_done_lists_the_command_for_the_other_arms_alone(tmp_path):
    """Two arms' rows committed, the others' run dirs lost with a machine: the command remakes the five arms left,
    the overlay's sweep values in its order, and neither arm that is done."""
    write_study(tmp_path / "runs", arms=(STANDARD, IIF))
    status, why = results_of(tmp_path)[NAME]
    assert status == "missing"
    assert "(finished seeds per run name: ppo 20, iif-p50 20, random-p50 0, random-p25 0, consensus-p50 0," in why
    assert (
        "`rlinfluence -m +experiment=twenty_seeds env=frozenlake engine=stacked seed='range(20)' "
        "method='{name:random},{name:random,p:25},{name:consensus},{name:iif,granularity:episode},"
        "{name:consensus,granularity:episode}'`" in why
    )


def test_the_narrowed_command_names_each_arms_own_method_and_only_an_overlays_own_arms():
    """Each method value of the narrowed sweep composes to its arm's runs; an output whose arms come from two
    overlays keeps the whole command (its parts are one overlay each)."""
    study = twenty_seeds.STUDY_RUNS
    for arm in twenty_seeds.ARMS:
        command = study.command_for_arms("acrobot", (arm,))
        value = command.split(" method=")[1].strip("'")
        overrides = ("+experiment=twenty_seeds", "env=acrobot", f"method={value}")
        assert method_tag(composed(search_path(), overrides).method) == arm.tag_for("acrobot")
    adam = Runs("adam_preconditioner", ADAM_ARMS)
    assert adam.command_for_arms("minigrid", ADAM_ARMS[:1]) == adam.command_for("minigrid")


def test_an_env_gym_env_is_drawn_under_its_title_with_env_gyms_p(tmp_path):
    """Pendulum's runs (env=gym) are filed under gym-Pendulum-v1; its IIF and random drop env=gym's p = 50 %."""
    write_study(tmp_path / "runs", envs=("gym-Pendulum-v1",))
    assert results_of(tmp_path)[NAME][0] == "partial"
    iif = sections(tmp_path)["Pendulum: paired by seed"].set_index(["Method", "Against"]).loc["IIF", "Standard PPO"]
    assert (iif["Seeds"], iif["Typical seed"]) == ("20", "decided: better")
    assert iif_p("gym-Pendulum-v1") == 50.0 == iif_p("gym")
    tidy = read_experiment(tmp_path / "data", "twenty_seeds")
    assert set(tidy["env"]) == {"gym-Pendulum-v1"}
    assert {"iif-p50", "random-p50", "consensus-ep-p50"} <= set(tidy["method_tag"])


def test_minigrid_under_adam_is_a_block_of_its_own_beside_minigrid_under_sgd(tmp_path):
    """MiniGrid's Adam runs (the block minigrid-adam) and its SGD runs share an env and run names, told apart by their
    optimizer: the SGD block is drawn from its 20 seeds alone, the Adam block with 19 is missing, with its command."""
    write_study(tmp_path / "runs", envs=("minigrid",))
    write_study(tmp_path / "runs", envs=("minigrid-adam",), seeds=19)
    assert results_of(tmp_path)[NAME][0] == "partial"
    missing = (tmp_path / "out" / "MISSING.md").read_text()
    assert (
        "- twenty_seeds/minigrid-adam: needs 20 seeds run by every arm, has 19 in common (finished seeds per run "
        "name: ppo 19, iif-p12.5 19" in missing
    )
    assert (
        "`rlinfluence -m +experiment=twenty_seeds env=minigrid eval.episodes=100 optimizer=adam engine=stacked "
        "seed='range(20)'`" in missing
    )
    tables = sections(tmp_path)
    assert "MiniGrid, Adam: paired by seed" not in tables
    assert set(tables["MiniGrid: per arm"]["Seeds"]) == {"20"}
    tidy = read_experiment(tmp_path / "data", "twenty_seeds")  # an arm's CSV holds both blocks
    assert (tmp_path / "data" / "twenty_seeds.minigrid.ppo.csv").exists()
    assert tidy.groupby("optimizer")["seed"].nunique().to_dict() == {"adam": 19, "sgd": 20}


def test_the_decision_rule_rarely_decides_under_no_difference():
    """Null studies drawn from differences symmetric about 0 are decided at about the tests' level or less (the CI
    must agree too), each question no more often than either."""
    differences = np.random.default_rng(3).standard_normal(SEEDS)
    typical, expected, either = twenty_seeds.false_decision_rates(differences)
    assert 0 < typical <= 0.08 and 0 < expected <= 0.08
    assert max(typical, expected) <= either <= typical + expected


def test_the_leaderboard_reports_the_rules_false_decision_rate(study):
    root, _ = study
    board = (root / "out" / f"{NAME}.md").read_text()
    section = board.split("## The decision rule under no difference")[1]
    assert section.count("| FrozenLake |") == 2  # IIF against standard PPO and against consensus
    # IIF beats standard PPO by 1 + 0.01·seed: resampled with random signs, a null study's spread is tiny next to
    # nothing, so a typical-seed decision comes only from sign runs as lopsided as the tests' level allows.
    iif_row = next(line for line in section.splitlines() if "| FrozenLake | IIF | Standard PPO |" in line)
    rates = [float(cell.split(" %")[0]) for cell in iif_row.split("|")[5:8]]
    assert all(0 <= rate <= 8 for rate in rates[:2]) and rates[2] >= max(rates[:2])


def _run(returns: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"round": range(len(returns)), "test_return": returns})


def test_a_seed_fails_by_ending_below_its_start_or_never_reaching_standard_ppos_first_level():
    standard = _run([0.0, 1.0, 2.0, 3.0])  # its first level: 1.0, reached in round 1
    assert twenty_seeds.failed(_run([0.0, 0.0, 0.0, 0.0]), standard)  # ends where it started, never reaches 1.0
    assert twenty_seeds.failed(_run([0.0, 2.0, 3.0, -1.0]), standard)  # reached it, then ended below its start
    assert not twenty_seeds.failed(_run([0.0, 0.0, 0.0, 1.0]), standard)  # reached it late: slow, not failed
    flat = _run([0.0, 0.0, 0.0, 0.0])  # standard PPO never improves: no level, only the end counts
    assert not twenty_seeds.failed(_run([0.0, 0.0, 0.0, 0.0]), flat)
