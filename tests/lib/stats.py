"""Percentiles for every bench and the load test: one definition, so that a
p50 or a p90 in docs/performance.md means the same whichever command printed
it.

The definition is the nearest rank: the p-th percentile of n values is the
value of rank ceil(p/100 * n) in ascending order (rank 1 for p = 0). It is
always one of the measured values, never an interpolation; the median is the
50th percentile by the same rule (the lower middle value of an even count).
"""
import fractions
import math


def pct(values, p):
    """The p-th percentile (0 <= p <= 100, nearest rank) of values, or None
    when there are none."""
    if not values:
        return None
    if not 0 <= p <= 100:
        raise ValueError("percentile %r is not within 0..100" % (p,))
    v = sorted(values)
    # exact arithmetic: 90/100 * 10 is 9, not 9.000000000000002 (rank 10)
    rank = math.ceil(fractions.Fraction(str(p)) * len(v) / 100)
    return v[max(rank, 1) - 1]


def median(values):
    """The 50th percentile (nearest rank)."""
    return pct(values, 50)


def summary(values):
    """{n, min, p50, p90, p95, p99, max} of values (None figures when there
    are none)."""
    return {"n": len(values), "min": min(values) if values else None, "p50": pct(values, 50),
            "p90": pct(values, 90), "p95": pct(values, 95), "p99": pct(values, 99),
            "max": max(values) if values else None}
