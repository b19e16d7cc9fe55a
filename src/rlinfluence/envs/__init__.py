"""Environment construction and the fast simulators that replay library envs step for step."""
