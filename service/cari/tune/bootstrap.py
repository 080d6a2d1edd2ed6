"""A mean with its 95 % bootstrap interval: the questions resampled with replacement, so a
figure over a few dozen questions reads as what it is."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ROUNDS = 2000
SEED = 7  # fixed: the same figures give the same interval


def mean_interval(values: Sequence[float], rounds: int = ROUNDS) -> tuple[float, float, float]:
    """The mean of `values`, and the 2.5th and 97.5th percentiles of the means of `rounds`
    resamples."""
    if not values:
        raise ValueError("no values to average")
    data = np.asarray(values, dtype=np.float64)
    draws = np.random.default_rng(SEED).integers(0, len(data), size=(rounds, len(data)))
    means = data[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)
