"""How a settings key is declared: once, as an attrs field whose metadata says how it is checked
and what a change to it makes generate again (`setting`).

The metadata, read by the stages that need it:

- `check`: what `settings.structure` checks beyond the key's type, on the value's own path
  (`overrides[2].ctx: expected an integer above 0, got 0`): a `Check`, or the name of a parser
  in `settings.structure.PARSERS` for a value with a shape of its own (shell words, a kind, a URL).
- `outputs`: for a top-level key (a `Settings` field), what it invalidates: `EVERY_FRAGMENT`
  (it is in every model's key: `emit.dispatch.global_inputs`), `CONFIG` (the config task's key:
  `commands.tasks`), `PER_MODEL` (read through each model's job, whose key carries what it reads:
  a change resolves every model again, and re-emits those whose job changed), `PER_MATCH` (the
  overrides: a change resolves again only the models whose matching override changed),
  `WALK` (the roots: what the walk finds; a model's row carries it), or nothing. The keys of a
  nested record follow the key that holds it (an override's are `PER_MATCH`, as `overrides`
  is); a top-level key must say (`()`: nothing), a test checks it. `commands.library` reads
  this table to resolve again what a change can affect, and nothing else
  (docs/maintainers/performance.md#what-a-settings-change-resolves-again).
- `key`: the YAML key when the code names the field otherwise (a backend row's `variant` holds
  `build`).
- `older`: an older spelling of the key, still accepted (`variants` for `profiles`); a record
  that uses both is refused, naming the place (`settings.structure`).
- `knobs`: the llama-server flag meanings it sets (`flags.llama.FLAG_KNOBS` values): a
  profile that sets it drops an inherited `extra_args` flag of the same meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from attrs import field, frozen

EVERY_FRAGMENT = "every fragment"
CONFIG = "config"
PER_MODEL = "per model"
PER_MATCH = "the models it matches"
WALK = "the walk"


@frozen
class Check:
    """A value test; a value that fails it is refused with "<expected>, got <value>".

    Example: Check(lambda v: v > 0, "expected an integer above 0").
    """

    test: Callable[[Any], bool]
    expected: str


def setting(default: Any = attrs.NOTHING, *, check: Check | str | None = None, outputs: tuple[str, ...] | None = None,
            key: str | None = None, older: str | None = None, knobs: tuple[str, ...] = (), **kw: Any) -> Any:
    """A settings field (module docstring), required unless it has a default; `kw` goes to
    `attrs.field` (`factory`, `kw_only`, …)."""
    metadata = {"check": check, "outputs": outputs, "key": key, "older": older, "knobs": knobs}
    if "factory" in kw:
        return field(metadata=metadata, **kw)
    return field(default=default, metadata=metadata, **kw)


def inputs_of(record: Any, output: str) -> tuple[Any, ...]:
    """The values of `record`'s keys a change to which invalidates `output` (their `outputs`)."""
    return tuple(getattr(record, a.name) for a in attrs.fields(type(record))
                 if output in (a.metadata.get("outputs") or ()))


def key_of(attribute: attrs.Attribute) -> str:
    """The YAML key of a settings field."""
    return attribute.metadata.get("key") or attribute.name


def older_spellings(cls: type) -> dict[str, str]:
    """A record's older key spellings → the keys they stand for."""
    return {a.metadata["older"]: key_of(a) for a in attrs.fields(cls) if a.metadata.get("older")}


def one_of(values: tuple[str, ...], expected: str | None = None) -> Check:
    """A keyword check: "expected one of a, b, c" unless worded otherwise."""
    return Check(lambda v: v in values, expected or f"expected one of {', '.join(values)}")


def int_range(low: int, high: int) -> Check:
    """An integer from `low` to `high`, both included (docs/settings.md#numbers)."""
    return Check(lambda v: low <= v <= high, f"expected an integer from {low} to {high}")


def number_range(low: float, high: float, *, above: bool = False) -> Check:
    """A number from `low` (excluded when `above`) to `high`; the bounds make it finite, as
    `nan` and `.inf` fail the comparisons (docs/settings.md#numbers)."""
    if above:
        return Check(lambda v: low < v <= high, f"expected a number above {low:g} and at most {high:g}")
    return Check(lambda v: low <= v <= high, f"expected a number from {low:g} to {high:g}")


NONBLANK = Check(lambda v: v.strip() != "", "expected a non-empty string")
FRACTION = Check(lambda v: 0 < v <= 1, "expected a fraction in (0, 1]")
