"""The relevance frontier replays answers as the engine refuses them, its per-question baseline
moves a question the way its docstring says, and on fitted scales the probes move with it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from bench.relevance_frontier import (
    ProbeBaselines,
    Question,
    Reading,
    Size,
    fitted,
    joint_fitted,
    joint_scale,
    outcomes,
    rates,
    refused,
)

from cari.search import fit
from cari.search.relevance import Scale

RARE = 50.0  # specificity: words no other chunk would hold by chance


def question(label: str, on_topic: bool, cosine: float, baseline: float) -> Question:
    target = label.split("/")[0]
    return Question(
        label,
        target,
        on_topic,
        np.array([cosine, 0.70]),
        np.array([0.0, 0.0]),
        np.array([RARE, RARE]),
        baseline,
    )


def everywhere(scale: Scale) -> Callable[[str], Scale]:
    return lambda _: scale


def test_an_answer_is_refused_only_when_no_chunk_reaches_the_threshold() -> None:
    scale = Scale(0.80, 0.98)  # relevance 0.25 at cosine 0.845
    assert not refused(question("cisi/test", True, 0.85, 0.0), scale, Reading())
    assert refused(question("cisi/test", True, 0.84, 0.0), scale, Reading())
    # A chunk holding nearly all of the question's words is enough alone.
    worded = Question(
        "cisi/test", "cisi", True, np.array([0.5]), np.array([0.95]), np.array([RARE]), 0.0
    )
    assert not refused(worded, scale, Reading())


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


def test_coverage_read_with_the_cosine_lifts_a_chunk_that_holds_the_words() -> None:
    scale = Scale(0.80, 0.98)  # relevance 0.25 at 0.845
    holding = Question(
        "cacm/test", "cacm", True, np.array([0.84]), np.array([0.5]), np.array([RARE]), 0.0
    )
    assert refused(holding, scale, Reading())
    assert not refused(holding, scale, Reading(lift=0.1 / 0.18))  # 0.84 + 0.05
    bare = Question(
        "cacm/test", "cacm", True, np.array([0.84]), np.array([0.0]), np.array([RARE]), 0.0
    )
    assert refused(bare, scale, Reading(lift=0.1 / 0.18))


def test_each_joint_floor_refuses_as_many_off_topic_tuning_questions_as_the_raw_cosine() -> None:
    """An off-topic tuning question at cosine 0.85 holding half its words: the raw cosine
    refuses none at the configured floor 0.80 (cut at 0.845), so every weight's floor is the
    configured one, and an on-topic question lifted by its coverage is no longer refused."""
    found = [
        Question(
            "cisi/test",
            "cranfield",
            False,
            np.array([0.85]),
            np.array([0.5]),
            np.array([RARE]),
            0.0,
        ),
        Question(
            "cacm/test", "cacm", True, np.array([0.84]), np.array([0.5]), np.array([RARE]), 0.0
        ),
        Question(
            "cisi/test", "cisi", True, np.array([0.90]), np.array([0.9]), np.array([RARE]), 0.0
        ),
        Question(
            "cacm/test", "cisi", False, np.array([0.70]), np.array([0.0]), np.array([RARE]), 0.0
        ),
    ]
    report = joint_scale(found, 0.80, 0.18)
    assert report["raw"]["rates"]["cacm/test"]["on_topic_refused"] == 1.0
    for joint in (0.05, 0.1, 0.15, 0.2):
        assert report[f"joint {joint}"]["floor"] == 0.80
        assert report[f"joint {joint}"]["rates"]["cacm/test"]["on_topic_refused"] == 0.0


def test_the_coverage_reading_is_centred_where_every_size_refuses_as_many_off_topic() -> None:
    """Each size has one off-topic tuning question the cosine alone refuses (0.835 < 0.845),
    holding half and 0.6 of its words: each lift's centre is the lowest keeping both refused
    (lift 0.5: 0.835 + 0.09 x (0.6 - c) < 0.845, so c = 0.49). A reporting question at 0.84
    holding 0.6 of its words (lexical relevance 0.1) is then answered; a tuning question at
    0.87 holding none is refused by every lift but 0.25, which is chosen."""
    scale = Scale(0.80, 0.98)
    full = [
        Question(
            "cisi/test",
            "cranfield",
            False,
            np.array([0.835]),
            np.array([0.5]),
            np.array([RARE]),
            0.0,
        ),
        Question(
            "cisi/test", "cisi", True, np.array([0.95]), np.array([0.9]), np.array([RARE]), 0.0
        ),
        Question(
            "cranfield/test",
            "cranfield",
            True,
            np.array([0.87]),
            np.array([0.0]),
            np.array([RARE]),
            0.0,
        ),
        Question(
            "cacm/test", "cacm", True, np.array([0.84]), np.array([0.6]), np.array([RARE]), 0.0
        ),
    ]
    small = [
        Question(
            "cisi/test",
            "cranfield",
            False,
            np.array([0.835]),
            np.array([0.6]),
            np.array([RARE]),
            0.0,
        ),
        Question(
            "cisi/test", "cisi", True, np.array([0.95]), np.array([0.9]), np.array([RARE]), 0.0
        ),
    ]
    scales = {"cisi": scale, "cranfield": scale, "cacm": scale}
    report = joint_fitted([Size("full", full, scales), Size("small", small, scales)])
    assert report["full"]["cosine alone"]["cacm/test"]["on_topic_refused"] == 1.0
    assert {lift: report["small"][f"lift {lift}"]["centre"] for lift in (0.25, 0.5, 0.75, 1.0)} == {
        0.25: 0.38,
        0.5: 0.49,
        0.75: 0.53,
        1.0: 0.545,
    }
    for lift in (0.25, 0.5, 0.75, 1.0):
        found = report["full"][f"lift {lift}"]["rates"]
        assert found["tuning sets"]["off_topic_refused"] == 1.0
        assert found["cacm/test"]["on_topic_refused"] == 0.0
        assert found["cranfield/test"]["on_topic_refused"] == (0.0 if lift == 0.25 else 1.0)
    assert report["chosen"] == {"lift": 0.25, "centre": 0.38}
