"""Every output `rlinfluence task=figures` makes: those drawn from runs (outputs.py), then Section 4's,
drawn from the analyses' CSVs (section4.py)."""

from rlinfluence.figures import outputs, section4

OUTPUTS = outputs.OUTPUTS + section4.OUTPUTS
