"""The relevance frontier replays answers as the engine refuses them, its per-question baseline
moves a question the way its docstring says, and on fitted scales the probes move with it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from bench.relevance_frontier import ProbeBaselines, Question, fitted, outcomes, rates, refused

from cari.search import fit
from cari.search.relevance import Scale


def question(label: str, on_topic: bool, cosine: float, baseline: float) -> Question:
    target = label.split("/")[0]
    return Question(
        label, target, on_topic, np.array([cosine, 0.70]), np.array([0.0, 0.0]), baseline
    )


def everywhere(scale: Scale) -> Callable[[str], Scale]:
    return lambda _: scale


def test_an_answer_is_refused_only_when_no_chunk_reaches_the_threshold() -> None:
    scale = Scale(0.80, 0.98)  # relevance 0.25 at cosine 0.845
    assert not refused(question("cisi/test", True, 0.85, 0.0), scale, 0.0)
    assert refused(question("cisi/test", True, 0.84, 0.0), scale, 0.0)
    # A chunk holding nearly all of the question's words is enough alone.
    worded = Question("cisi/test", "cisi", True, np.array([0.5]), np.array([0.95]), 0.0)
    assert not refused(worded, scale, 0.0)


def test_the_everyday_baseline_asks_more_of_a_question_close_to_everything() -> None:
    near = question("cisi/test", False, 0.85, 0.90)  # off-topic, close to everyday questions
    far = question("cisi/test", True, 0.84, 0.70)  # on-topic, far from them
    tuning = question("cranfield/test", True, 0.95, 0.80)
    found = [near, far, tuning]
    scale = everywhere(Scale(0.80, 0.98))
    raw = rates(outcomes(found, 0.0, 0.80, scale))
    assert raw["cisi/test"] == {"on_topic_refused": 1.0, "off_topic_refused": 0.0}
    shifted = rates(outcomes(found, 1.0, 0.80, scale))  # shifts +0.1 and -0.1
    assert shifted["cisi/test"] == {"on_topic_refused": 0.0, "off_topic_refused": 1.0}
    assert shifted["tuning sets"]["on_topic_refused"] == 0.0
    assert shifted["all sets"]["off_topic_refused"] == 1.0


def test_a_fitted_scale_is_placed_on_probes_shifted_as_the_questions_are() -> None:
    """The bundled probes reach the collection at 0.845, where the configured scale puts
    relevance 0.25: unshifted, the fit keeps it; shifted by 0.02 (their baselines 0.82 against
    the centre 0.80), the cut falls at 0.825 and the scale moves down by 0.02."""
    probes = fit.Probes([0.9] * 10, [0.845] * 10, [f"own {i}" for i in range(10)])
    found = {"c": ProbeBaselines(probes, on_topic=[0.80] * 10, off_topic=[0.82] * 10)}
    base = Scale(0.80, 0.98)
    assert fitted(found, 0.0, 0.80, base) == {"c": base}
    (moved,) = fitted(found, 1.0, 0.80, base).values()
    assert moved.cosine_floor == pytest.approx(0.78)
    assert moved.cosine_ceiling == pytest.approx(0.96)
