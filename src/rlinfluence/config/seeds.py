"""`seeds=` on a single command (engine=stacked's seed list), read before Hydra merges it: a range or a choice
is taken as the list it names, and anything else than a list of integers is refused in our own one line
(OmegaConf's would name its own types). A sweep's `seed=` is packed into `seeds=` by launch/manifest.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlinfluence.choices import ConfigError

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

SEEDS_FORM = "give a list of integer seeds, seeds=[0,1,2], or a range, seeds='range(20)'"


def _is_seed(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def overrides_by_key(overrides: Sequence[str]) -> dict[str, Override] | None:
    """The command line's overrides by key, parsed by Hydra's grammar; None when Hydra refuses them (it says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return {o.get_key_element(): o for o in OverridesParser.create().parse_overrides(list(overrides))}
    except HydraException:
        return None


def listed_seeds(overrides: Sequence[str]) -> dict[str, list[str]]:
    """{the `seeds=` word: the word that replaces it} for a range or choice (`seeds='range(3)'` -> `seeds=[0,1,2]`),
    empty when there is nothing to replace; ConfigError for seeds that are not a list of integers, and for
    `seed=` beside `seeds=` (which would be ignored)."""
    parsed = overrides_by_key(overrides) or {}  # a line Hydra refuses: Hydra says why
    seeds = parsed.get("seeds")
    if seeds is None or seeds.input_line is None:
        return {}
    if "seed" in parsed:
        raise ConfigError(
            f"{seeds.input_line} and {parsed['seed'].input_line} both name the seeds: engine=stacked trains the seeds "
            "of seeds=, so give seeds= alone"
        )
    values = list(seeds.sweep_iterator()) if seeds.is_sweep_override() else seeds.value()
    if values is None:  # seeds=null: the default, `seed` alone
        return {}
    if not isinstance(values, list) or not all(_is_seed(value) for value in values):
        raise ConfigError(f"{seeds.input_line} is not a list of integer seeds: {SEEDS_FORM}")
    if not seeds.is_sweep_override():
        return {}
    return {seeds.input_line: [f"seeds=[{','.join(map(str, values))}]"]}
