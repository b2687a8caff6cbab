"""Statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from snnbench.store.stats import median_ci, noise_warning, summarize


def test_textbook_values() -> None:
    # 1..9: median 5; linear quantiles q1 = 3, q3 = 7; mean 5; sample std sqrt(60/8)
    s = summarize([9, 1, 8, 2, 7, 3, 6, 4, 5])
    assert (s.n, s.median, s.q1, s.q3, s.iqr) == (9, 5.0, 3.0, 7.0, 4.0)
    assert s.mean == 5.0
    assert s.std == pytest.approx(math.sqrt(60 / 8))
    assert (s.min, s.max) == (1.0, 9.0)
    assert s.outliers == 0
    # n = 9 at 99 %: only [x(1), x(9)] reaches the level (1 - 2/512 = 0.996)
    assert (s.ci99_low, s.ci99_high) == (1.0, 9.0)


def test_outliers_by_tukey_fences() -> None:
    # q1 = 2, q3 = 4 (linear, n = 5 after adding 100 → recompute): values 1,2,3,4,100
    s = summarize([1, 2, 3, 4, 100])
    assert (s.q1, s.median, s.q3) == (2.0, 3.0, 4.0)
    assert s.outliers == 1  # 100 > 4 + 1.5·2


def test_median_ci_order_statistics() -> None:
    values = list(range(1, 21))  # n = 20: P(B ≤ 3) = 0.00129 ≤ 0.005 < P(B ≤ 4) = 0.0059
    assert median_ci(values) == (4, 17)
    assert all(math.isnan(v) for v in median_ci(list(range(7))))  # n < 8 cannot reach 99 %


def test_empty_and_single() -> None:
    assert summarize([]).n == 0 and math.isnan(summarize([]).median)
    one = summarize([2.5])
    assert (one.median, one.std, one.iqr) == (2.5, 0.0, 0.0)


def test_noise_warnings_thresholds() -> None:
    quiet = summarize([1.0, 1.01, 1.02, 0.99, 1.0, 1.0, 1.01, 0.99, 1.0])
    assert noise_warning(quiet) == ""
    noisy = summarize([1.0, 1.15, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0, 1.12])
    assert noisy.iqr_ratio > 0.10
    assert noise_warning(noisy).startswith("noisy")
    gross = summarize([1, 2, 1, 2, 1, 2, 1, 2, 1.5])
    assert noise_warning(gross).startswith("very noisy")
    assert "--repeats" in noise_warning(gross) or "repeats" in noise_warning(gross)
