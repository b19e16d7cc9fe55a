"""Which dotted keys are settings: those of the schema (config/schema.py), and any key inside a mapping the
schema leaves open (env.make_kwargs, env.train_make_kwargs: an env's own keyword arguments; figures.collapse:
one entry per env). Hydra's `+key=value` adds a key the schema lacks; nothing reads it, so a run that has one
is refused like the misspelt `key=value` that Hydra refuses itself, naming the nearest setting.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError
from rlinfluence.config.schema import Config

HYDRA = "hydra"  # Hydra's own settings, which Hydra checks (a composed config holds them on request)


@functools.cache
def _fields(schema: Any) -> dict[str, Any]:
    """A dataclass's fields and their hints; none for anything else (a value cannot hold keys)."""
    return typing.get_type_hints(schema) if dataclasses.is_dataclass(schema) else {}


def _alternatives(hint: Any) -> tuple[Any, ...]:
    """What a field may hold: each type of a union (`X | None`), else the hint itself."""
    return typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass a field holds (`X` or `X | None`), None for a value or a mapping."""
    return next((arg for arg in _alternatives(hint) if isinstance(arg, type) and dataclasses.is_dataclass(arg)), None)


def _open_mapping_values(hint: Any) -> tuple[bool, Any]:
    """Whether a field is a mapping of free keys (`dict[str, V]`), and then the hint of its values V."""
    for arg in _alternatives(hint):
        if typing.get_origin(arg) is dict:
            return True, typing.get_args(arg)[1]
    return False, None


def not_a_setting(key: str) -> str | None:
    """The one-line refusal of a dotted `key` no code reads, naming the nearest setting; None for a setting
    or a key of an open mapping or of Hydra's own."""
    schema: Any = Config
    parts = key.split(".")
    if parts[0] == HYDRA:
        return None
    for depth, part in enumerate(parts):
        if schema is Any:  # inside a mapping of anything (an env's make kwargs)
            return None
        is_open, values = _open_mapping_values(schema)
        if is_open:  # `part` is a free key of the mapping; what is below it is checked against its values
            schema = values
            continue
        fields = _fields(schema)
        if part not in fields:
            return f"{key} is not a setting{_nearest(parts[:depth], part, list(fields))}"
        schema = _dataclass_in(fields[part]) or fields[part]
    return None


def _settings(schema: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted setting of a schema, the keys of open mappings aside."""
    for name, hint in _fields(schema).items():
        inner = _dataclass_in(hint)
        yield from _settings(inner, f"{prefix}{name}.") if inner else [f"{prefix}{name}"]


def _nearest(parent: list[str], part: str, siblings: list[str]) -> str:
    """` (did you mean <the nearest sibling>?)`, else the setting elsewhere whose name is nearest (a key put
    at the wrong level), else where to see every setting."""
    near = difflib.get_close_matches(part, siblings, n=1)
    if near:
        return f" (did you mean {'.'.join([*parent, near[0]])}?)"
    elsewhere: dict[str, str] = {}  # a name's first setting: env.rounds before analysis.*.rounds
    for setting in _settings(Config):
        elsewhere.setdefault(setting.rsplit(".", 1)[-1], setting)
    near = difflib.get_close_matches(part, list(elsewhere), n=1)
    if near:
        return f" (did you mean {elsewhere[near[0]]}?)"
    return " (rlinfluence --cfg job lists the settings)"


def _dotted_keys(node: dict[Any, Any], prefix: str = "") -> Iterator[str]:
    for key, value in node.items():
        yield f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _dotted_keys(value, f"{prefix}{key}.")


def check_settings(cfg: DictConfig) -> None:
    """Refuse (ConfigError, one line) the first key of `cfg` that is not a setting, e.g. a misspelt `+key=value`."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(tree, dict)
    for key in _dotted_keys(tree):
        refusal = not_a_setting(key)
        if refusal is not None:
            raise ConfigError(refusal)
