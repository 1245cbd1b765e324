"""Number rounding and printing that reproduce the original's Go arithmetic.

The Go original (docs/maintainers/sizing.md#vllm-footprint-and-utilization) rounds half away from zero (Go
`math.Round`; Python's `round` is banker's), rounds utilisations UP, and prints numbers with Go's
shortest `%g` (`4`, `0.92`, `16.08`, `1e+06`). Byte-stable output depends on these matching.
"""

from __future__ import annotations

import math

GIB = 1 << 30

#: A scaled value this close to an integer is that integer (float noise such as
#: 0.29000000001 × 100); the original used a fixed −1e-9, which a 1e-11 error already defeats.
_NOISE = 1e-6


def gib(n_bytes: int | float) -> float:
    """Bytes → GiB (1024³, the unit of every size swapgen prints)."""
    return n_bytes / GIB


def gib_figure(n_bytes: int | float) -> str:
    """`2.39`: a byte count in GiB to two decimals, where the unit is said once beside several."""
    return f"{gib(n_bytes):.2f}"


def gib_text(n_bytes: int | float) -> str:
    """`2.39 GiB`: a byte count as every explanation prints it (notes, comments, `swapgen show`,
    messages), in the one unit and under its own name."""
    return f"{gib_figure(n_bytes)} GiB"


def size_gb(n_bytes: int) -> float:
    """A byte count as every entry's metadata prints it (`size_gb`, `est_vram_gb`, `est_ram_gb`: GiB
    whatever the key's name) and
    the sizing formulas charge a file: GiB rounded half away from zero to 2 decimals (the
    original's `SizeGB`)."""
    return round_half_away(gib(n_bytes), 2)


def round_half_away(x: float, digits: int = 0) -> float:
    """Go's `math.Round(x·10^d) / 10^d`: ties go away from zero (2.5 → 3, −0.125 → −0.13).

    The tie test is made on the float64 product x·10^d, as Go does, so 1.005 (whose product is
    100.49999…) rounds to 1.0.
    """
    if not math.isfinite(x):
        return x
    from decimal import ROUND_HALF_UP, Decimal  # noqa: PLC0415 - lazy: a run that prints nothing imports none

    scale = 10.0**digits
    whole = Decimal(x * scale).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return float(whole) / scale


def ceil_to(x: float, digits: int = 0) -> float:
    """Round x UP to `digits` decimals, treating values within float noise of a step as on it.

    ceil_to(0.29000000001, 2) == 0.29 and ceil_to(0.2900001, 2) == 0.3.
    """
    if not math.isfinite(x):
        return x
    scale = 10.0**digits
    scaled = x * scale
    nearest = round(scaled)
    steps = nearest if abs(scaled - nearest) < _NOISE else math.ceil(scaled)
    return steps / scale


def format_g(x: float) -> str:
    """Go's `strconv.FormatFloat(x, 'g', -1, 64)`: shortest digits, exponent form when the
    decimal exponent is < −4 or ≥ 6 (e.g. `4`, `0.5`, `22.8`, `1e+06`, `1.5e-05`)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    from decimal import Decimal  # noqa: PLC0415 - lazy, as in `round_half_away`

    sign, digits, exponent = Decimal(repr(float(x))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    prefix = "-" if sign else ""
    if not text:
        return prefix + "0"
    # exponent counts from the last stored digit; re-anchor it on the significant digits kept
    point = len(digits) + exponent  # position of the decimal point within `digits`
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def counted(n: int, noun: str) -> str:
    """`1 model`, `2 models`, `0 models`: a count with its noun (regular plurals only)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
