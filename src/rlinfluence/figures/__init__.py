"""The paper's figures and tables, regenerated from run directories or from the committed tidy CSVs.

`runs` turns run directories into the tidy table, `outputs` says what each figure/table needs and
computes it, `render` writes byte-reproducible files, `regenerate` ties them together.
"""

from rlinfluence.figures.regenerate import main_from_config, regenerate
from rlinfluence.figures.runs import tidy_from_runs
from rlinfluence.tasks import register

register("figures")(main_from_config)

__all__ = ["main_from_config", "regenerate", "tidy_from_runs"]
