"""Rate strings (`10/s`, `100/min`, `RATE[,burst=N][,per_caller]`): what a Manifest's rate limits mean.

The overlay's `rate_limit`, the `--rate-limit` flag and the runtime's token buckets
(runtime/limits.py) read and describe rates with these functions, so a rate means one thing on
both sides of the Manifest.
"""

from __future__ import annotations

import math
import re
from typing import Final

from openapi2mcp.manifest.model import RateLimitSpec

_UNITS: Final = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
    "d": 86400.0, "day": 86400.0,
}


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([a-z]+))?\s*$", re.I)


def parse_rate(text: str | float) -> tuple[float, float]:
    """`10/s`, `100/min`, `5000/h`, `2/day` or a number (per second) -> (per second, per unit).

    The second value (the count per unit) is the default burst: "100/min" allows 100 calls at
    once and then 100 a minute.
    """
    if isinstance(text, bool):
        raise ValueError(f"invalid rate {text!r}")
    if isinstance(text, int | float):
        count, unit = float(text), 1.0
    else:
        m = _RATE.match(text)
        unit_name = (m.group(2) or "s").lower() if m else ""
        if unit_name not in _UNITS and unit_name.endswith("s") and len(unit_name) > 2:
            unit_name = unit_name[:-1]  # plurals: mins, hours, seconds, days
        if not m or unit_name not in _UNITS:
            raise ValueError(f"invalid rate {text!r}: write it as N/s, N/min, N/h or N/day (e.g. 10/s)")
        count, unit = float(m.group(1)), _UNITS[unit_name]
    if not math.isfinite(count) or count <= 0:
        raise ValueError(f"invalid rate {text!r}: it must be more than 0")
    return count / unit, count


def parse_rate_limit(text: str) -> RateLimitSpec:
    """The CLI and overlay shorthand: `RATE[,burst=N][,per_caller]`, e.g. `10/s,burst=20`."""
    first, *rest = [part.strip() for part in text.split(",")]
    rate, count = parse_rate(first)
    burst: int | None = None
    per_caller = False
    for part in rest:
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if key == "per_caller" and (not sep or value.strip().lower() in ("1", "true", "yes")):
            per_caller = True
        elif key == "burst" and sep and value.strip().isdigit() and int(value) >= 1:
            burst = int(value)
        else:
            raise ValueError(f"invalid rate limit {text!r}: expected RATE[,burst=N][,per_caller], e.g. 10/s,burst=20")
    return RateLimitSpec(rate=rate, burst=burst or default_burst(count), per_caller=per_caller)


def default_burst(count: float) -> int:
    return max(1, math.ceil(count))


def describe_rate(spec: RateLimitSpec) -> str:
    """10/s, 100/min, ... for messages (the largest unit that gives a whole-ish number)."""
    units = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("day", 86400.0))
    for name, unit in units:
        per = spec.rate * unit
        if per >= 1 and abs(per - round(per)) < 1e-6 * per:
            return f"{round(per)}/{name}"
    name, unit = next(((n, u) for n, u in units if spec.rate * u >= 1), units[-1])
    return f"{spec.rate * unit:.3g}/{name}"
