"""Launching sweeps: manifests (one run per line) and SLURM job arrays."""
