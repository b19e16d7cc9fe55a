"""rlinfluence: local data attribution for online RL and iterative influence-based filtering (IIF)."""

__version__ = "0.1.0"
