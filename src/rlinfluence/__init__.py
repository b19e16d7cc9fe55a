"""rlinfluence: local data attribution for online RL and iterative influence-based filtering (IIF).

The library layer for code outside this repo is `rlinfluence.attribution` and `rlinfluence.sb3` (docs/api.md).
"""

__version__ = "0.3.0"  # pyproject.toml reads it; CHANGELOG.md lists what each version changed
