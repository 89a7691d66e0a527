"""Small statistics over integer samples (the bench's figures, a hold's own among them)."""

from __future__ import annotations

from collections.abc import Sequence

from delayline.errors import BenchError


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending sequence (``fraction`` in 0..1)."""
    if not sorted_values:
        raise BenchError("no values")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def summary(values: Sequence[int]) -> dict[str, int | None]:
    """min, p50, p90, p99, max of ``values`` (all None when empty)."""
    ordered = sorted(values)
    if not ordered:
        return {"min": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {
        "min": ordered[0],
        "p50": percentile(ordered, 0.50),
        "p90": percentile(ordered, 0.90),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1],
    }
