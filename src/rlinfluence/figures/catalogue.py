"""Every output `rlinfluence task=figures` makes: those drawn from runs (outputs.py), then Section 4's,
drawn from the analyses' CSVs (section4.py), then the counterfactual check's (counterfactual.py), then the
RLHF outputs, drawn from the language-model runs' CSV (rlhf.py)."""

from rlinfluence.figures import counterfactual, outputs, rlhf, section4

OUTPUTS = outputs.OUTPUTS + section4.OUTPUTS + counterfactual.OUTPUTS + rlhf.OUTPUTS
