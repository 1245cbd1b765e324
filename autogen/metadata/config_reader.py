"""Typed look-ups in a Hugging Face `config.json` dict whose errors name the key: the one way
`hf_config` and `hf_layout` read a value, so a hostile or odd file gives a message, not a crash."""

from __future__ import annotations

import math

from autogen.errors import ModelError

#: Counts above these are refused as hostile (no model has 2^31 layers or 2^40 positions).
MAX_COUNT = 1 << 31
MAX_TOKENS = 1 << 40
#: Trained-window keys; vLLM takes the smallest present (`_get_and_verify_max_len`).
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length", "seq_len")


class ConfigReader:
    """Typed look-ups in one config dict; errors name the key (with its sub-config prefix).
    `hf_layout` reads the layer layout through it too."""

    def __init__(self, data: dict, prefix: str):
        self.data = data
        self.prefix = prefix
        self.found = ""  # the key the last count() read, for follow-up messages

    def count(self, keys: tuple[str, ...], limit: int = MAX_COUNT) -> int:
        """First non-null key as an integer in [0, limit) (4096.0 accepted), 0 when absent."""
        for key in keys:
            value = self.data.get(key)
            if value is None:
                continue
            self.found = self.prefix + key
            if isinstance(value, list) and value and all(is_int(v) for v in value):
                value = max(value)  # per-layer lists (Ernie VL experts): the largest
            if not is_int(value) or not 0 <= value < limit:
                raise ModelError(f"{self.found} must be a non-negative integer below {limit} (got {value!r})")
            return int(value)
        return 0

    def context(self) -> int:
        """Trained window: the smallest of vLLM's context keys (`derive_max_model_len`)."""
        values = [self.count((k,), MAX_TOKENS) for k in CONTEXT_KEYS]
        return min((v for v in values if v > 0), default=0)

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, bool):
            raise ModelError(f"{self.prefix}{key} must be true or false (got {value!r})")
        return value

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise ModelError(f"{self.prefix}{key} must be a string (got {value!r})")
        return value or ""

    def string_list(self, key: str) -> list[str] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ModelError(f"{self.prefix}{key} must be a list of strings")
        return value

    def int_list(self, key: str) -> list[int] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(is_int(v) and 0 <= v < MAX_COUNT for v in value):
            raise ModelError(f"{self.prefix}{key} must be a list of non-negative integers below {MAX_COUNT}")
        return [int(v) for v in value]


def is_int(value: object) -> bool:
    """An integer, or a float that holds one exactly (some exporters write 4096.0)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()
