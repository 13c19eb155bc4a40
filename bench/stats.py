"""Percentiles within a run, medians and spread across runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    present = [v for v in values if not math.isnan(v)]
    return statistics.median(present) if present else math.nan


def spread(values: Sequence[float]) -> tuple[float, float]:
    """(min, max) of the values that are numbers."""
    present = [v for v in values if not math.isnan(v)]
    return (min(present), max(present)) if present else (math.nan, math.nan)
