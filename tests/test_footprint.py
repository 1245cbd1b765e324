"""The memory record of an entry and swapgen's model corrected by the engine's figures."""

from __future__ import annotations

import json

import pytest

from autogen.emit.entry import Entry, Plan, Skip
from autogen.footprint import (
    MIB,
    DeviceMemory,
    Footprint,
    Gap,
    MemoryRecord,
    Reading,
    Source,
    record_from_data,
    record_to_data,
    with_gap,
)
from autogen.metadata.kvcost import kv_cost
from autogen.router.assemble import Fragment
from autogen.sizing.correction import NO_CORRECTION, EngineCorrection
from autogen.sizing.llama import LlamaKnobs, size_llama
from tests.builders import meta

GIB = 1 << 30


def fp(source=Source.ESTIMATE, *devices, host=None, unseen=(), margin=()):
    return MemoryRecord(source=source, devices=tuple(DeviceMemory(*d) for d in devices), host=host, unseen=unseen,
                     margin=margin)


class TestFootprint:
    def test_metadata_is_whole_mib_rounded_up(self):
        record = fp(Source.MEASURED, ("CUDA0", 10 * MIB + 1, 2 * MIB, MIB), host=DeviceMemory("Host", MIB, 0, 1),
                    unseen=(MIB,), margin=(128 * MIB,)).metadata()
        assert record == {"source": "measured", "host_mib": 2,
                          "devices": [{"device": "CUDA0", "model_mib": 11, "context_mib": 2, "compute_mib": 1,
                                       "other_mib": 129}]}

    def test_vram_adds_what_the_report_does_not_show_and_the_margin(self):
        f = fp(Source.MEASURED, ("CUDA0", 4, 3, 2), ("CUDA1", 1, 1, 1), unseen=(10, 20), margin=(100, 200))
        assert f.vram == 9 + 3 + 30 + 300 and f.device_bytes(1) == 223

    def test_over_by_device_or_pooled(self):
        f = fp(Source.ESTIMATE, ("GPU0", 10, 0, 0), ("GPU1", 2, 0, 0))
        assert f.over((8, 8)) == 2 and f.over((12,)) == 0 and f.over((6, 4)) == 4

    def test_spread_over_the_devices_by_their_share(self):
        f = fp(Source.ESTIMATE, ("GPU0", 300, 30, 3), unseen=(9,)).spread(["GPU0", "GPU1"], [24, 12])
        assert [d.model for d in f.devices] == [200, 100] and f.unseen == (6, 3)
        assert fp(Source.ESTIMATE, ("GPU0", 1, 1, 1)).spread(["GPU3"], [24]).devices[0].name == "GPU0"

    def test_the_estimators_gap_goes_where_the_engine_put_each_part(self):
        f = fp(Source.FIT_PARAMS, ("CUDA0", 0, 300, 10), ("CUDA1", 0, 100, 0))
        g = with_gap(f, Gap("4 slots", context=40, compute=8))
        assert [d.context for d in g.devices] == [330, 110] and [d.compute for d in g.devices] == [18, 0]
        assert g.note == "4 slots" and with_gap(f, None) is f

    def test_round_trip_through_plain_data(self):
        f = fp(Source.FIT_PARAMS, ("CUDA0", 1, 2, 3), host=DeviceMemory("Host", 4, 5, 6), unseen=(7,))
        assert record_from_data(record_to_data(f)) == f
        with pytest.raises(ValueError, match="not a memory record"):
            record_from_data({"source": "guess", "devices": []})


class TestCorrection:
    def test_no_readings_no_correction(self):
        assert EngineCorrection.from_readings(()) is NO_CORRECTION

    def test_each_part_the_largest_over_the_readings(self):
        ours = fp(Source.ESTIMATE, ("GPU0", 1000, 100, 50), unseen=(10,))
        a = Reading((), (), fp(Source.FIT_PARAMS, ("CUDA0", 900, 200, 80), unseen=(10,)), ours)
        b = Reading((), (), fp(Source.MEASURED, ("CUDA0", 1100, 100, 40), unseen=(10,), margin=(128,)), ours)
        c = EngineCorrection.from_readings((a, b))
        assert (c.model_scale, c.context_scale, c.compute_delta, c.other_delta) == (1.1, 2.0, 30, 128)
        assert c.source == "llama-fit-params and measured" and c.readings == 2

    def test_a_cpu_build_compares_with_the_whole_estimate(self):
        """No accelerator: the engine's host holds what swapgen placed on the GPU and the host."""
        ours = fp(Source.ESTIMATE, ("GPU0", 600, 100, 50), host=DeviceMemory("Host", 400, 0, 0))
        c = EngineCorrection.from_readings((Reading((), (), fp(Source.FIT_PARAMS, ("Host", 1000, 100, 50)), ours),))
        assert c.model_scale == 1.0

    def test_sizing_follows_a_larger_context_cost(self):
        """An engine that needs twice swapgen's KV gets a shorter context from the same budget."""
        m = meta()
        plain = size_llama(m, kv_cost(m), size=int(4.6 * GIB), budget=12 * GIB, knobs=LlamaKnobs(), runtime=0)
        doubled = size_llama(m, kv_cost(m), size=int(4.6 * GIB), budget=12 * GIB, knobs=LlamaKnobs(), runtime=0,
                             correction=EngineCorrection(context_scale=2.0, readings=1, source="llama-fit-params"))
        assert doubled.ctx < plain.ctx and doubled.estimate.part("context") < plain.estimate.part("context")
        assert doubled.decided.vram <= 12 * GIB and any("corrected by llama-fit-params" in n for n in doubled.notes)


class TestEntryFootprint:
    """An entry's typed footprint: what metadata renders, and its own data in a fragment file."""

    FOOTPRINT = Footprint(engine="llama.cpp", vram=11_703_567_073, host=524_288_000, disk=4_920_000_000, gpus=(0, 1),
                          results=(("ctx", 40960), ("ngl", 37), ("n_cpu_moe", 0), ("kv_type", "f16")),
                          memory=fp(Source.ESTIMATE, ("GPU0", 4 * GIB, GIB, MIB), unseen=(GIB // 2,)))

    def test_it_survives_its_own_data_as_typed_data(self):
        data = json.loads(json.dumps(self.FOOTPRINT.to_data()))
        assert Footprint.from_data(data) == self.FOOTPRINT
        assert Footprint.from_data(Footprint("sam3_server", disk=5).to_data()) == Footprint("sam3_server", disk=5)

    def test_metadata_figures_are_gib_to_two_decimals(self):
        assert (self.FOOTPRINT.vram_gb, self.FOOTPRINT.host_gb, self.FOOTPRINT.disk_gb) == (10.9, 0.49, 4.58)

    @pytest.mark.parametrize("broken", [{}, {"engine": "x"}, {**FOOTPRINT.to_data(), "vram": "big"},
                                        {**FOOTPRINT.to_data(), "memory": {"source": "guess"}}])
    def test_anything_else_is_refused(self, broken):
        with pytest.raises(ValueError, match="not a"):
            Footprint.from_data(broken)


class TestFragmentFile:
    """What a model task leaves for `swapgen list` and the assembly is typed data in its fragment
    file: entries with their footprints, skips, conflicts, failed starts and what a preset leaves out."""

    def test_it_survives_its_own_file(self, tmp_path):
        entry = Entry(id="alpha", argv=("llama-server", "-m", "/m/alpha.gguf"), footprint=TestEntryFootprint.FOOTPRINT)
        plan = Plan(model_id="alpha", entries=(entry,), skips=(Skip("alpha-64k", "needs 30.1 GiB"),),
                    conflicts=("overrides[0].llama_swap.metadata.engine: swapgen writes this key",))
        fragment = Fragment.from_plan(plan, left_out=(Skip("alpha-x", "a ';' in its path"),),
                                      start_errors={"alpha": "llama_model_load: error loading model"})
        path = tmp_path / "alpha.json"
        path.write_bytes(fragment.to_json())
        loaded = Fragment.load(str(path))
        assert loaded == fragment
        assert loaded.entry_ids == ("alpha",) and loaded.memory_sources == {"alpha": "estimate"}
        assert loaded.skips == (("alpha-64k", "needs 30.1 GiB"),) and loaded.left_out == (("alpha-x", "a ';' in its path"),)
        assert dict(loaded.start_errors) == {"alpha": "llama_model_load: error loading model"}

    def test_an_older_fragment_is_refused(self, tmp_path):
        """A fragment of an older swapgen (an untyped summary) is refused, so its task runs again."""
        path = tmp_path / "old.json"
        path.write_text(json.dumps({"model": "a", "blocks": [], "members": [], "files": [], "footprints": [],
                                    "sections": [], "summary": {"entries": ["a"]}}))
        with pytest.raises(KeyError):
            Fragment.load(str(path))
