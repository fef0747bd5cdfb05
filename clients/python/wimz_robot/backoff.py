"""Reconnect delays: capped exponential back-off with full jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays between reconnect attempts.

    The n-th delay is drawn uniformly from ``[0, min(cap, base * 2**n)]`` ("full jitter"),
    so a fleet that lost the relay at the same moment does not come back in lock-step.
    ``slow_floor`` is added when the relay asked us to slow down (HTTP 429, close 4029 or 4008).
    """

    base: float = 0.5
    cap: float = 30.0
    slow_floor: float = 5.0
    slow_cap: float = 120.0
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next_delay(self, slow: bool = False) -> float:
        """The delay before the next attempt; each call counts one more failed attempt."""
        cap = self.slow_cap if slow else self.cap
        ceiling = min(cap, self.base * (2 ** min(self.attempt, 30)))
        self.attempt += 1
        delay = self.rng.uniform(0, ceiling)
        return min(cap, delay + self.slow_floor) if slow else delay

    def reset(self) -> None:
        """Called once a connection has been established."""
        self.attempt = 0
