"""The relevance frontier replays answers as the engine refuses them, and its per-question
baseline moves a question the way its docstring says."""

from __future__ import annotations

import numpy as np
from bench.relevance_frontier import Question, figures, refused

from cari.search.relevance import Scale


def question(label: str, on_topic: bool, cosine: float, baseline: float) -> Question:
    return Question(label, on_topic, np.array([cosine, 0.70]), np.array([0.0, 0.0]), baseline)


def test_an_answer_is_refused_only_when_no_chunk_reaches_the_threshold() -> None:
    scale = Scale(0.80, 0.98)  # relevance 0.25 at cosine 0.845
    assert not refused(question("cisi/test", True, 0.85, 0.0), scale, 0.0)
    assert refused(question("cisi/test", True, 0.84, 0.0), scale, 0.0)
    # A chunk holding nearly all of the question's words is enough alone.
    worded = Question("cisi/test", True, np.array([0.5]), np.array([0.95]), 0.0)
    assert not refused(worded, scale, 0.0)


def test_the_everyday_baseline_asks_more_of_a_question_close_to_everything() -> None:
    near = question("cisi/test", False, 0.85, 0.90)  # off-topic, close to everyday questions
    far = question("cisi/test", True, 0.84, 0.70)  # on-topic, far from them
    tuning = question("cranfield/test", True, 0.95, 0.80)
    found = [near, far, tuning]
    raw = figures(found, 0.0, 0.80, 0.18)
    assert raw["cisi/test"] == {"on_topic_refused": 1.0, "off_topic_refused": 0.0}
    shifted = figures(found, 1.0, 0.80, 0.18)  # centre 0.8: shifts +0.1 and -0.1
    assert shifted["cisi/test"] == {"on_topic_refused": 0.0, "off_topic_refused": 1.0}
    assert shifted["tuning sets"]["on_topic_refused"] == 0.0
    assert shifted["all sets"]["off_topic_refused"] == 1.0
