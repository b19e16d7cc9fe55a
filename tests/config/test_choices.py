"""choices.chosen: a builder given a name its registry has no entry for refuses it in one line, naming the
key and the names it has (issue 33), instead of falling through to a default."""

from __future__ import annotations

import pytest

from conftest import refusal
from rlinfluence.config.schema import OptimizerConfig, TargetConfig
from rlinfluence.control.networks import feature_extractor
from rlinfluence.targets import make_target
from rlinfluence.update import make_optimizer


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: make_optimizer(OptimizerConfig(name="adamw"), []), "optimizer.name='adamw' is not one of: sgd, adam"),
        (lambda: make_target(TargetConfig(name="seq"), (16,)), "target.name='seq' is not one of: return, action"),
        (
            lambda: feature_extractor("resnet", (16,), 64),
            "env.network.kind='resnet' is not one of: mlp, cnn, nature_cnn",
        ),
    ],
)
def test_a_builder_refuses_a_name_it_has_no_entry_for_instead_of_falling_through(build, message):
    assert refusal(build) == message
