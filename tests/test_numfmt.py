"""Go-compatible rounding and printing (docs/maintainers/sizing.md#vllm-footprint-and-utilization)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autogen.numfmt import GIB, ceil_to, format_g, gib, round_half_away, size_gb


class TestRoundHalfAway:
    @pytest.mark.parametrize(
        ("x", "digits", "expected"),
        [
            (2.5, 0, 3.0),  # banker's rounding would give 2
            (0.5, 0, 1.0),
            (-2.5, 0, -3.0),
            (0.125, 2, 0.13),  # exactly representable tie
            (-0.125, 2, -0.13),
            (16.075, 2, 16.08),  # 16.075 × 100 rounds to exactly 1607.5 in float64, as in Go
            (1.005, 2, 1.0),  # 1.005 × 100 is 100.49999…: Go's math.Round gives 1.00 too
            (2.88, 2, 2.88),
            (0.12 * 24, 2, 2.88),  # 2.8799999999999999
            (0.67 * 24, 2, 16.08),
            (15.5, 0, 16.0),
            (0.0, 2, 0.0),
        ],
    )
    def test_matches_go_math_round(self, x, digits, expected):
        assert round_half_away(x, digits) == expected

    def test_python_round_differs_on_ties(self):
        """The reason the helper exists: Python rounds 2.5 to 2."""
        assert round(2.5) == 2 and round_half_away(2.5) == 3.0

    def test_non_finite_pass_through(self):
        assert math.isinf(round_half_away(math.inf, 2))
        assert math.isnan(round_half_away(math.nan, 2))

    @given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
    def test_never_moves_more_than_half_a_step(self, x):
        assert abs(round_half_away(x, 2) - x) <= 0.005 + 1e-6 * max(1.0, abs(x))


class TestCeilTo:
    @pytest.mark.parametrize(
        ("x", "digits", "expected"),
        [
            (12 / 24, 2, 0.5),
            (6 / 24, 2, 0.25),
            (2.795 / 24, 2, 0.12),  # 11.645… → 12
            (15.5 / 24, 2, 0.65),
            (16 / 24, 2, 0.67),
            (0.29000000001, 2, 0.29),  # float noise above a step stays on it
            (0.28999999999, 2, 0.29),
            (0.2900001, 2, 0.3),  # a real excess rounds up
            (0.0, 2, 0.0),
            (3.0825 / 24, 2, 0.13),
        ],
    )
    def test_rounds_up_but_ignores_noise(self, x, digits, expected):
        assert ceil_to(x, digits) == expected

    @given(st.floats(min_value=0, max_value=100, allow_nan=False))
    def test_result_is_never_meaningfully_below_input(self, x):
        assert ceil_to(x, 2) >= x - 1e-7


class TestFormatG:
    @pytest.mark.parametrize(
        ("x", "text"),
        [
            (4, "4"),
            (4.0, "4"),
            (0.92, "0.92"),
            (16.08, "16.08"),
            (22.8, "22.8"),
            (0.5, "0.5"),
            (0.9, "0.9"),
            (100.0, "100"),
            (123456.7, "123456.7"),
            (1e6, "1e+06"),
            (1.5e7, "1.5e+07"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e21, "1e+21"),
            (0.0, "0"),
            (-0.0, "-0"),
            (-2.5, "-2.5"),
            (0.1 + 0.2, "0.30000000000000004"),  # shortest round-trip digits, like Go
            (math.inf, "+Inf"),
            (-math.inf, "-Inf"),
            (math.nan, "NaN"),
        ],
    )
    def test_prints_like_go_percent_g(self, x, text):
        assert format_g(x) == text

    @given(st.floats(allow_nan=False, allow_infinity=False))
    def test_round_trips(self, x):
        assert float(format_g(x)) == x


def test_gib_is_binary():
    assert gib(GIB) == 1.0
    assert gib(402_653_184) == 0.375


@pytest.mark.parametrize(("n_bytes", "gb"), [
    (0, 0.0), (GIB // 8, 0.13), (5 * GIB // 8, 0.63), (3 * GIB // 8, 0.38),  # ties go away from zero
    (22 * (1 << 20), 0.02), (15 * GIB, 15.0), (16 * GIB - 1, 16.0),
])
def test_size_gb_is_gib_to_two_decimals_ties_away_from_zero(n_bytes, gb):
    """One helper for every entry's GB figures; Python's round would give 0.12 and 0.62 on the ties."""
    assert size_gb(n_bytes) == gb
