"""The server's own metric helpers (inference/metrics.py)."""

from __future__ import annotations

from inference.metrics import TokenRate


def test_token_rate_is_the_window_and_stays_bounded_without_scrapes() -> None:
    """``add`` runs at every decode step; with nobody reading the rate (no scrape), the events kept must
    still be only those of the last window, not one per step since start-up."""
    rate = TokenRate(window_s=10.0)
    for t in range(1000):
        rate.add(3, now=float(t))
        assert len(rate._events) <= 11
    assert rate.value(now=999.0) == 3 * 11 / 10.0  # steps 989..999 are within the window
    assert rate.value(now=2000.0) == 0.0
