"""The control agent (env.agent=control): its trainer, rollout collection, actor-critic networks and evaluation."""
