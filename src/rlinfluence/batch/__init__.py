"""Many seeds of one config in one process: their actor-critics stacked, one batched forward and
one batched PPO step for all of them; run by `rlinfluence engine=stacked seeds=[...]` (batch/engine.py)."""
