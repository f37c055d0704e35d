"""The median's interval, found without scipy.stats (whose import costs a runner most of a
second), is the one scipy's `quantile_test` gives: the same order statistics for every count
of rounds, ties among them, and open where scipy's is."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from runner.job.kinds.benchmark import stats

RNG = np.random.default_rng(20261207)


def _scipy_interval(values: np.ndarray) -> tuple[float | None, float | None]:
    ci = scipy_stats.quantile_test(values, q=float(np.median(values)), p=0.5)
    low, high = (float(end) for end in ci.confidence_interval(stats.CONFIDENCE))
    return (low, high) if math.isfinite(low) and math.isfinite(high) else (None, None)


def test_the_median_interval_is_scipys_for_every_count_of_rounds() -> None:
    opened = 0
    for n in [*range(2, 130), 257, 1000]:
        values = RNG.lognormal(0, 0.05, n)
        tied = np.round(values, 2)  # rounds that read alike
        for sample in (values, tied):
            assert stats._interval(sample) == _scipy_interval(sample), n
        opened += stats._interval(values) == (None, None)
    assert opened == 4  # two to five rounds bound no median at 95 %
