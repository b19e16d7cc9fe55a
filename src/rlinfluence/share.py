"""The filter share p: the percent of a round's negative-influence records a filter drops.

One value type for every place that takes it (method.p, analysis.intervene.p, the public API's `p`, the SB3
callback's): a number in (0, 100], or `auto` for the methods that choose each round's count on held-out
records. `FilterShare.parse` reads and range-checks it (one line naming the key), `str` shows it as run dirs
name it (`50`, `12.5`, `auto`), `percent` is what tables store (None for auto).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinfluence.choices import ConfigError

AUTO = "auto"


@dataclass(frozen=True)
class FilterShare:
    percent: float | None  # None: auto, each round's count chosen on held-out records

    def __post_init__(self) -> None:
        if self.percent is not None and not 0 < self.percent <= 100:
            raise ValueError(f"a filter share is a percent in (0, 100], got {self.percent:g}")

    @classmethod
    def parse(cls, value: object, key: str, auto: bool = False, note: str = "") -> FilterShare:
        """`value` (a config value or an API argument) as a share, or ConfigError naming `key`: a number in
        (0, 100], or `auto` where `auto` is allowed; `note` ends the message (who takes `auto`)."""
        if auto and value == AUTO:
            return cls(None)
        if (
            isinstance(value, str) and value != AUTO
        ):  # '50' from Python or a quoted override: a number was meant, say it is text
            allowed = "a number in (0, 100] or auto" if auto else "a number in (0, 100]"
            raise ConfigError(
                f"{key}={value!r} is a string; it needs {allowed} (percent of negative-influence records to drop){note}"
            )
        numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        if not numeric or not 0 < value <= 100:  # type: ignore[operator]  # numeric: a number
            allowed = "(0, 100] or auto" if auto else "(0, 100]"
            shown = float(value) if numeric else value  # type: ignore[arg-type]
            raise ConfigError(
                f"{key}={shown} must be in {allowed} (percent of negative-influence records to drop){note}"
            )
        return cls(float(value))  # type: ignore[arg-type]

    @property
    def is_auto(self) -> bool:
        return self.percent is None

    def __str__(self) -> str:
        return AUTO if self.percent is None else format(self.percent, "g")

    def count(self, n_negative: int) -> int:
        """IIF's count: ⌊n_neg · p / 100⌋ (a share that is not auto)."""
        if self.percent is None:
            raise ValueError("p=auto has no fixed count: the method chooses it on held-out records")
        return int(np.floor(n_negative * self.percent / 100))
