"""Hydra composition outside the app: the config `rlinfluence <overrides>` runs with, and the env, optimizer and
method presets a run's settings are compared with (run/identity.py hashes what differs from them).

Composed once per search path and overrides (`composed`'s cache): a sweep composes each env/optimizer/method once.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

# Imported for its registration of `config_schema` in Hydra's ConfigStore, which conf/config.yaml's defaults start
# from: whatever composes through this module (the CLI, rlinfluence-manifest, a script) has it registered.
from rlinfluence.config import schema  # noqa: F401
from rlinfluence.config.keys import not_a_setting
from rlinfluence.config.paths import CONFIG_DIR

ANY_ENV = "gym"  # env=gym (conf/env/gym.yaml): any registered env.id, which its runs are filed under


@contextlib.contextmanager
def initialized(config_dir: str = CONFIG_DIR) -> Iterator[None]:
    """Hydra initialized on `config_dir` (a conf/ like the repo's) inside the block, the schema registered."""
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        yield


@contextlib.contextmanager
def composing() -> Iterator[GlobalHydra]:
    """The Hydra of the app, test or manifest that is composing, or one on the repo's conf/ when none is."""
    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        yield hydra
        return
    with initialized():
        yield hydra


# The running app's `hydra.searchpath` (a user's own conf/ dirs, e.g. a filter method's conf/method/ file): Hydra
# applies it to the app's own composition only, so the presets are composed with it too. Set by the app for
# the span of its run (`app_search_path`): Hydra's HydraConfig outlives a run in the process that made it.
_APP_SEARCH_PATH: list[str] = []


@contextlib.contextmanager
def app_search_path(paths: list[str]) -> Iterator[None]:
    """Compose the presets with `paths` on the search path (the app's hydra.searchpath) inside the block."""
    previous = list(_APP_SEARCH_PATH)
    _APP_SEARCH_PATH[:] = paths
    try:
        yield
    finally:
        _APP_SEARCH_PATH[:] = previous


def compose_config(overrides: list[str]) -> DictConfig:
    """The config `rlinfluence <overrides>` runs with, from the search path `composing` gives."""
    searchpath = [f"hydra.searchpath=[{','.join(_APP_SEARCH_PATH)}]"] if _APP_SEARCH_PATH else []
    with composing():
        return compose("config", overrides=[*overrides, *searchpath])


def search_path() -> str:
    """The search path composition uses now: part of `composed`'s cache key (a test's conf/ is not the repo's)."""
    hydra = GlobalHydra.instance().hydra  # None: not initialized
    base = str(hydra.config_loader.get_search_path()) if hydra is not None else CONFIG_DIR
    return f"{base} + {_APP_SEARCH_PATH}"


def one_line(error: HydraException) -> str:
    """Hydra's multi-line report of a composition error in one line: its own lines, the first line of
    its cause, the options of a missing choice; never the config search path."""
    cause = error.__cause__
    if isinstance(error, ConfigCompositionException) and isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
        # `key=value` for a key the config lacks: ours names the nearest setting; Hydra's would advise `+key=value`,
        # which validation refuses too (config/keys.py). A key of an open mapping (env.make_kwargs) does take `+`.
        refusal = not_a_setting(str(cause.full_key))
        if refusal is not None:
            return refusal
    lines = [
        line.strip().rstrip(".") for line in str(error).split("\nConfig search path:")[0].splitlines() if line.strip()
    ]
    if isinstance(error, MissingConfigException) and error.options:
        return f"{lines[0]} (options: {', '.join(error.options)})"
    if error.__cause__ is not None:
        lines.insert(1, str(error.__cause__).splitlines()[0])
    return "; ".join(lines)


@functools.cache
def composed(path: str, overrides: tuple[str, ...]) -> DictConfig:
    """`compose_config(overrides)`, cached per search path `path`."""
    return compose_config(list(overrides))


def preset_groups(cfg: DictConfig) -> tuple[str, ...]:
    """The groups whose presets a run's defaults are: its env, optimizer and method (each method.name is
    a conf/method/ option; a config without a method, as the figures' lookups build, has the default's).
    env=gym's preset is taken with the run's env.id, which its run dir names already."""
    method = OmegaConf.select(cfg, "method.name")
    env_id = [f"env.id={cfg.env.id}"] if cfg.env.name == ANY_ENV else []
    return (
        f"env={cfg.env.name}",
        *env_id,
        f"optimizer={cfg.optimizer.name}",
        *([f"method={method}"] if method else []),
    )


def default_config(cfg: DictConfig) -> DictConfig:
    """The config composed from the run's env, optimizer and method alone (no key=value override)."""
    return composed(search_path(), preset_groups(cfg))


def preset(env_name: str) -> DictConfig:
    """The config `rlinfluence env=<env_name>` runs with: the env's preset, its optimizer included."""
    return composed(search_path(), (f"env={env_name}",))


def envs_with_state_key() -> list[str]:
    """The `env=` options whose preset sets env.state_key (for error messages)."""
    with composing() as hydra:
        names = hydra.config_loader().get_group_options("env")
    return [name for name in names if preset(name).env.state_key is not None]
