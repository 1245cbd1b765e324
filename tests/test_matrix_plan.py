"""`routing: auto`'s planner: every set fits every card it uses, sets are maximal, CPU-only
engines are in each set, the output is deterministic, and the warnings name what cannot share."""

from __future__ import annotations

import itertools
import random

import pytest
import yaml

from autogen.router.matrix_dsl import compile_sets, expand
from autogen.router.matrix_plan import (
    MAX_EXACT_SETS,
    Device,
    Load,
    check_plan,
    demand,
    host_devices,
    plan_matrix,
    render_matrix,
)
from autogen.settings.schema import Gpu

ONE = (Device(0, 24.0),)
TWO = (Device(0, 24.0), Device(1, 12.0))
#: A budget of 22 GiB: what entries sharing a 24 GiB card may take together.
BUDGETED = (Device(0, 24.0, 22.0), Device(1, 12.0))


def gpu(entry, est, *, model=None, devices=None, size=4.0, engine="llama.cpp"):
    return Load(entry_id=entry, model_id=model or entry, est_vram_gb=est, devices=devices, size_gb=size,
                engine=engine)


def cpu(entry, size=0.7):
    return Load(entry_id=entry, model_id=entry, est_vram_gb=0.0, devices=None, size_gb=size, engine="parakeet.cpp")


def fits(members, loads, devices) -> bool:
    """A card holding one entry takes up to its VRAM, one holding several up to its shared size."""
    by_id = {x.entry_id: x for x in loads}
    models = [by_id[e].model_id for e in members]
    for k, d in enumerate(devices):
        on_card = [demand(by_id[e], devices)[k] for e in members if demand(by_id[e], devices)[k]]
        limit = d.vram_gb if len(on_card) == 1 else (d.shared_gb or d.vram_gb)
        if sum(on_card) > round(limit * 100):
            return False
    return len(models) == len(set(models))


def brute_force_maximal(loads, devices) -> set[frozenset[str]]:
    """Every maximal feasible set of GPU entries, by trying all subsets."""
    ids = [x.entry_id for x in loads if x.est_vram_gb > 0]
    feasible = [frozenset(c) for r in range(1, len(ids) + 1) for c in itertools.combinations(ids, r)
                if fits(c, loads, devices)]
    return {s for s in feasible if not any(s < t for t in feasible)}


def gpu_sets(plan) -> set[frozenset[str]]:
    return {frozenset(s) - set(plan.cpu_only) for s in plan.sets}


def random_library(seed: int, n: int, devices) -> list[Load]:
    rng = random.Random(seed)
    loads = []
    for i in range(n):
        pinned = None
        if len(devices) > 1 and rng.random() < 0.5:
            pinned = tuple(sorted(rng.sample([d.index for d in devices], rng.randint(1, len(devices)))))
        model = f"model{i // 2 if rng.random() < 0.3 else i}"
        loads.append(gpu(f"e{i:02d}", round(rng.uniform(0.5, 20.0), 2), model=model, devices=pinned,
                         engine=rng.choice(["llama.cpp", "vllm", "sd-server"])))
    return loads


class TestDemand:
    def test_a_pinned_split_charges_each_card_in_proportion_to_its_vram(self):
        """llama-server's `-ts` and vLLM's per-GPU utilisation both scale with the card."""
        assert demand(gpu("a", 18.0, devices=(0, 1)), TWO) == (1200, 600)

    def test_an_unpinned_llama_server_spreads_over_every_card(self):
        assert demand(gpu("a", 9.0), TWO) == (600, 300)

    def test_another_engine_unpinned_takes_the_first_card(self):
        assert demand(gpu("a", 9.0, engine="sd-server"), TWO) == (900, 0)

    def test_shares_round_up_so_sums_never_undercount(self):
        assert demand(gpu("a", 10.0, devices=(0, 1)), (Device(0, 24.0), Device(1, 24.0))) == (500, 500)
        assert demand(gpu("a", 0.01, devices=(0, 1)), TWO) == (1, 1)

    def test_a_cpu_only_entry_takes_nothing(self):
        assert demand(cpu("asr"), TWO) == (0, 0)

    def test_host_devices_prefer_the_inventory_then_the_card_reading_then_the_budget(self):
        assert host_devices((Gpu(1, 12.0), Gpu(0, 24.0)), 36.0, 22.0) == (Device(0, 24.0, 22.0),
                                                                           Device(1, 12.0, 12.0))
        assert host_devices((), 24.0, 22.0) == (Device(None, 24.0, 22.0),)
        assert host_devices((), None, 22.0) == (Device(None, 22.0, 22.0),)
        assert host_devices((), None, None) == (Device(None, 8.0),)


class TestSets:
    def test_one_card_pairs_what_fits_and_keeps_each_set_maximal(self):
        loads = [gpu("big", 19.0), gpu("mid", 10.0), gpu("small", 4.0), gpu("tiny", 1.0)]
        plan = plan_matrix(loads, ONE)
        assert plan.sets == (("big", "small", "tiny"), ("mid", "small", "tiny"))
        assert plan.exact and check_plan(plan, loads, ONE) == []

    @pytest.mark.parametrize("devices", [ONE, TWO, BUDGETED, (Device(0, 24.0), Device(1, 24.0), Device(2, 16.0, 14.0))],
                             ids=["one GPU", "two GPUs", "two GPUs, a budget", "three GPUs"])
    @pytest.mark.parametrize("seed", range(12))
    def test_sets_are_exactly_the_maximal_feasible_sets(self, devices, seed):
        """Against a brute force over every subset: each set fits every card it uses, none can
        take another entry, and none is missing."""
        loads = random_library(seed, 10, devices)
        plan = plan_matrix(loads, devices)
        assert gpu_sets(plan) == brute_force_maximal(loads, devices)
        assert check_plan(plan, loads, devices) == []

    def test_on_two_cards_a_set_fits_each_card_not_just_their_sum(self):
        """8 + 8 GiB on the 12 GiB card overflows it though 16 GiB is under the 36 GiB pooled."""
        loads = [gpu("a", 8.0, devices=(1,)), gpu("b", 8.0, devices=(1,)), gpu("c", 20.0, devices=(0,))]
        plan = plan_matrix(loads, TWO)
        assert plan.sets == (("a", "c"), ("b", "c"))
        assert plan.usage[0] == (("GPU 0", 20.0, 24.0), ("GPU 1", 8.0, 12.0))

    def test_profiles_of_one_model_never_share(self):
        """The same weights twice: a request for the other profile swaps."""
        loads = [gpu("q", 20.0, model="q"), gpu("q-share", 10.0, model="q"), gpu("g-share", 10.0, model="g")]
        plan = plan_matrix(loads, ONE)
        assert plan.sets == (("g-share", "q-share"), ("q",))

    def test_cpu_only_engines_are_in_every_set(self):
        loads = [gpu("a", 20.0), gpu("b", 20.0), cpu("asr"), cpu("tts")]
        plan = plan_matrix(loads, ONE)
        assert plan.sets == (("a", "asr", "tts"), ("asr", "b", "tts"))
        assert plan.cpu_only == ("asr", "tts")

    def test_only_cpu_engines_make_one_set(self):
        assert plan_matrix([cpu("asr"), cpu("tts")], ONE).sets == (("asr", "tts"),)

    def test_no_entry_no_matrix(self):
        assert plan_matrix([], ONE) is None

    def test_the_plan_does_not_depend_on_the_order_of_its_inputs(self):
        loads = random_library(3, 14, TWO)
        first = plan_matrix(loads, TWO)
        assert all(plan_matrix(random.Random(k).sample(loads, len(loads)), TWO) == first for k in range(5))
        assert render_matrix(first) == render_matrix(plan_matrix(list(reversed(loads)), TWO))

    def test_evict_costs_are_whole_gb_on_disk_at_least_one(self):
        plan = plan_matrix([gpu("a", 10.0, size=17.28), gpu("b", 10.0, size=0.14), cpu("c", size=0.0)], ONE)
        assert plan.evict_costs == (("a", 18), ("b", 1), ("c", 1))


    def test_shared_cards_keep_the_budget_and_a_lone_entry_may_fill_the_card(self):
        """vLLM at 0.95 of the card runs alone; two entries together stay within the 22 GiB budget."""
        loads = [gpu("vllm", 22.8, devices=(0,), engine="vllm"), gpu("a", 11.0, devices=(0,)),
                 gpu("b", 11.5, devices=(0,)), gpu("c", 10.9, devices=(0,)), gpu("d", 6.0, devices=(1,))]
        plan = plan_matrix(loads, BUDGETED)
        assert plan.sets == (("a", "c", "d"), ("b", "d"), ("d", "vllm"))
        assert check_plan(plan, loads, BUDGETED) == []
        assert check_plan(plan, loads, BUDGETED, [frozenset({"a", "b"})]) == [
            "set ['a', 'b'] takes 22.5 GiB of GPU 0 (24 GiB, 22 GiB when shared)"]


class TestWarnings:
    def test_a_model_too_big_to_share_is_named(self):
        plan = plan_matrix([gpu("huge", 22.8), gpu("a", 10.0), gpu("b", 10.0)], ONE)
        assert plan.sets == (("a", "b"), ("huge",))
        assert plan.warnings == ("too big to share a card with any other model, so each runs alone: 'huge' (22.8 GiB); "
                                 "a smaller `vram_budget_gb` (or a llama profile with one) lets a model pair",)

    def test_an_entry_above_its_card_is_in_no_set(self):
        plan = plan_matrix([gpu("over", 30.0), gpu("a", 10.0)], ONE)
        assert plan.sets == (("a",),)
        assert plan.warnings[0] == "'over' needs more than GPU 0 (30 of 24 GiB): it is in no set and runs alone"


class TestBound:
    def test_past_the_bound_a_pair_cover_keeps_every_pair_that_fits(self):
        """Twenty entries of a quarter card: C(20, 4) = 4845 maximal sets. With a bound of 100
        the plan keeps maximal sets such that every two entries share one, and says so."""
        loads = [gpu(f"q{i:02d}", 6.0) for i in range(20)]
        plan = plan_matrix(loads, ONE, limit=100)
        assert not plan.exact
        assert "more than 100 maximal sets" in plan.warnings[0]
        sets = gpu_sets(plan)
        assert all(len(s) == 4 for s in sets)  # each still maximal
        assert all(any({a, b} <= s for s in sets) for a, b in itertools.combinations([x.entry_id for x in loads], 2))
        assert len(sets) <= 190 and check_plan(plan, loads, ONE) == []

    def test_under_the_bound_the_plan_is_exact(self):
        loads = [gpu(f"q{i:02d}", 6.0) for i in range(8)]
        plan = plan_matrix(loads, ONE)
        assert plan.exact and len(plan.sets) == 70  # C(8, 4)
        assert MAX_EXACT_SETS >= 70


class TestRender:
    def test_written_sets_expand_to_the_plan(self):
        loads = [*random_library(5, 9, TWO), cpu("asr")]
        plan = plan_matrix(loads, TWO)
        matrix = yaml.safe_load("\n".join(render_matrix(plan)))["routing"]["router"]["settings"]["matrix"]
        roots = compile_sets(list(matrix["sets"].items()), matrix["vars"].get)
        written = {m for name in matrix["sets"] for m in expand(roots[name], roots)}
        assert written == {frozenset(s) for s in plan.sets}


def test_sets_that_differ_in_one_model_share_a_line():
    """Each group expands to exactly the sets it replaces."""
    from autogen.router.matrix_plan import factored  # noqa: PLC0415 - only this test needs it

    sets = [("a", "asr", "x"), ("asr", "b", "x"), ("asr", "c", "x"), ("a", "asr", "b")]
    groups = factored(sets)
    assert groups == [(("asr", "x"), ("a", "b", "c")), (("asr", "b"), ("a",))]
    assert {tuple(sorted((*key, alt))) for key, alts in groups for alt in alts} == set(sets)
