"""Every output `rlinfluence task=figures` makes: those drawn from runs (outputs.py), then Section 4's,
drawn from the analyses' CSVs (section4.py), then the counterfactual check's (counterfactual.py), then the
RLHF outputs, drawn from the language-model runs' CSV (rlhf.py), then the cross-env aggregates (aggregates.py) and the fidelity comparison with the authors' released
pipeline (fidelity.py)."""

from rlinfluence.figures import aggregates, counterfactual, fidelity, outputs, rlhf, section4

OUTPUTS = outputs.OUTPUTS + section4.OUTPUTS + counterfactual.OUTPUTS + rlhf.OUTPUTS + aggregates.OUTPUTS + fidelity.OUTPUTS
