"""Models and data sets by Hugging Face name, or one line saying which is missing and how to get it.

This code never downloads by itself on a machine without the Hub: a name that is not in the local
cache (HF_HOME) is refused before the run starts (`require`), and a load that fails anyway is turned
into the same one-line error (`load`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rlinfluence.choices import ConfigError

MODEL, DATASET = "model", "dataset"
T = TypeVar("T")


class HubAssetMissing(ConfigError):
    """A model or data set named in the config is not available on this machine."""


def _missing(key: str, name: str, kind: str, error: Exception) -> HubAssetMissing:
    from huggingface_hub import constants

    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    repo_type = " --repo-type dataset" if kind == DATASET else ""
    return HubAssetMissing(
        f"{key}={name}: the {kind} is not available here ({reason}); download it once where the Hub is reachable "
        f"(`hf download {name}{repo_type}`) into the cache HF_HOME points at (now {constants.HF_HOME}), then rerun"
    )


def require(key: str, name: str, kind: str) -> None:
    """Refuse a model / data set that is neither a local directory nor in the Hugging Face cache."""
    if Path(name).is_dir():
        return
    if kind == MODEL:
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(name, "config.json"), str):
            raise _missing(key, name, kind, FileNotFoundError("config.json is not in the cache"))
        return
    import datasets

    load(key, name, kind, datasets.load_dataset_builder)


def load(key: str, name: str, kind: str, loader: Callable[[str], T]) -> T:
    try:
        return loader(name)
    except (OSError, ValueError, ConnectionError, FileNotFoundError) as error:
        raise _missing(key, name, kind, error) from None
