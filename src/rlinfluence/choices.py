"""The ground floor: the error a refused setting raises, and the helpers that refuse one.

It imports nothing (no Hydra, no OmegaConf, nothing of ours), so the library layer (rlinfluence.attribution,
rlinfluence.sb3) can refuse bad input with the same one-line errors as the CLI without pulling the config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar


class ConfigError(ValueError):
    """A config value that composes but cannot be run; the message is one line naming the key."""


def require(ok: bool, message: str) -> None:
    """Refuse a setting: ConfigError(`message`) unless `ok`."""
    if not ok:
        raise ConfigError(message)


def require_one_of(key: str, value: Any, allowed: Iterable[str]) -> None:
    """A closed choice: refuse a value outside `allowed` in one line naming the key and every allowed value."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not one of: {', '.join(allowed)}")


Chosen = TypeVar("Chosen")


def chosen(registry: Mapping[str, Chosen], key: str, value: str) -> Chosen:
    """The registry's entry for a closed choice (validation checked it): a builder never falls through
    to a default for a name it does not know."""
    require_one_of(key, value, registry)
    return registry[value]
