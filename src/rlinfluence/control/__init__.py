"""The control agent (env.agent=control) and its engine: the trainer of a seed, rollout collection, actor-critic
networks and evaluation, and the engine that runs each stage of a round once for all the seeds of a process (one, or
a set), their networks stacked by seed (engine.py)."""
