"""`target: llama-server`: a llama-server entry's finished command line becomes its preset
section, as llama.cpp's preset reader will read it back (common/preset.cpp), and the sections
assemble into one file with `[*]`, preloads and `--models-max` (router/preset.py)."""

from __future__ import annotations

import attrs
import pytest

from autogen.emit.entry import Entry, Plan, Skip
from autogen.errors import SwapgenError
from autogen.flags.llama import FLAG_KNOBS, recorded_table
from autogen.footprint import Footprint
from autogen.router.matrix_plan import Device, Load
from autogen.router.preset import PresetError, Section, models_max, preset_plan, render_preset, section_of
from autogen.router.preset_check import check_preset_text

EXE = "/opt/llama/bin/llama-server"
HEAD = (EXE, "-m", "/models/Qwen3 8B.gguf", "--host", "127.0.0.1", "--port", "${PORT}")


def entry(*args: str, id: str = "qwen3-8b", env: tuple[str, ...] = (), **kw) -> Entry:
    return Entry(id=id, argv=HEAD + args, env=env, **kw)


class TestSectionOf:
    def test_every_flag_becomes_the_key_llama_cpp_writes(self):
        """Short and long spellings end as the option's last name (common_preset::to_ini)."""
        section = section_of(entry("-c", "40960", "-ngl", "37", "--n-cpu-moe", "4", "-fit", "off", "-fa", "on",
                                   "-ctk", "q8_0", "-ctv", "q8_0", "--parallel", "2", "-t", "8"), EXE)
        assert section.keys == (("model", "/models/Qwen3 8B.gguf"), ("ctx-size", "40960"), ("n-gpu-layers", "37"),
                                ("n-cpu-moe", "4"), ("fit", "off"), ("flash-attn", "on"), ("cache-type-k", "q8_0"),
                                ("cache-type-v", "q8_0"), ("parallel", "2"), ("threads", "8"))

    def test_host_and_port_are_the_routers(self):
        assert "host" not in dict(section_of(entry(), EXE).keys)
        assert "port" not in dict(section_of(entry(), EXE).keys)

    def test_switches_are_true_and_negative_spellings_false(self):
        keys = dict(section_of(entry("--mmproj", "/models/mmproj.gguf", "--no-mmproj-offload", "--embeddings",
                                     "-nkvo"), EXE).keys)
        assert keys["mmproj"] == "/models/mmproj.gguf"
        assert keys["mmproj-offload"] == "false"
        assert keys["embeddings"] == "true"
        assert keys["kv-offload"] == "false"

    def test_flags_the_emitter_never_heard_of_flow_through_the_table(self):
        """A draft model, a LoRA, tensor overrides: whatever the llama emitter adds."""
        keys = dict(section_of(entry("-md", "/models/draft.gguf", "--lora", "/l/a.gguf", "--lora", "/l/b.gguf",
                                     "-ot", "exps=CPU"), EXE).keys)
        assert keys["model-draft"] == "/models/draft.gguf"
        assert keys["lora"] == "/l/a.gguf,/l/b.gguf"  # a list option: occurrences join
        assert keys["override-tensor"] == "exps=CPU"

    def test_a_device_pin_becomes_the_device_key_and_the_order_variable_the_routers(self):
        section = section_of(entry("-sm", "layer", "-ts", "24,12",
                                   env=("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,2")), EXE)
        keys = dict(section.keys)
        assert keys["device"] == "CUDA0,CUDA2"
        assert (keys["split-mode"], keys["tensor-split"]) == ("layer", "24,12")
        assert section.env == ("CUDA_DEVICE_ORDER=PCI_BUS_ID",)

    @pytest.mark.parametrize(("variable", "device"), [("HIP_VISIBLE_DEVICES=1", "ROCm1"),
                                                      ("GGML_VK_VISIBLE_DEVICES=3", "Vulkan3")])
    def test_other_runtimes_name_their_devices(self, variable, device):
        assert dict(section_of(entry(env=(variable,)), EXE).keys)["device"] == device

    def test_aliases_and_unload_timeout(self):
        section = section_of(entry(aliases=("qwen", "q8"), llama_swap=(("unloadTimeout", 30),)), EXE)
        keys = dict(section.keys)
        assert (keys["alias"], keys["stop-timeout"]) == ("qwen,q8", "30")
        assert section.aliases == ("qwen", "q8")

    @pytest.mark.parametrize(("args", "env", "reason"), [
        (("--frobnicate", "1"), (), "'--frobnicate' is not an argument of llama-server b11434"),
        (("--control-vector-layer-range", "1", "4"), (), "takes two values"),
        (("-c", "4096", "--ctx-size", "8192"), (), "--ctx-size is given twice ('4096', '8192')"),
        (("--api-key", "k"), (), "--api-key: llama.cpp's router owns it"),
        (("--alias", "x"), (), "--alias: llama.cpp's router owns it"),
        (("--models-max", "3"), (), "--models-max: llama.cpp's router owns it"),
        (("--chat-template-file", "/t/a;b.jinja"), (), "ends a value at ';'"),
        (("--chat-template-file", "/t/#1.jinja"), (), "ends a value at '#'"),
        (("--chat-template-file", "/t/a.jinja "), (), "trims the blanks around a value"),
        (("-ngl",), (), "-ngl has no value"),
        (("-dev", "CUDA1"), ("CUDA_VISIBLE_DEVICES=0",), "devices are pinned twice"),
    ])
    def test_what_a_preset_cannot_say_is_refused_with_the_reason(self, args, env, reason):
        with pytest.raises(PresetError) as exc:
            section_of(entry(*args, env=env), EXE)
        assert reason in str(exc.value)

    def test_an_entry_of_another_build_is_refused(self):
        with pytest.raises(PresetError, match=r"runs /opt/vk/llama-server, but llama.cpp's router starts every "
                                              r"model with its own binary \(/opt/llama/bin/llama-server\)"):
            section_of(attrs.evolve(entry(), argv=("/opt/vk/llama-server", *HEAD[1:])), EXE)

    def test_a_comma_in_an_alias_is_refused(self):
        with pytest.raises(PresetError, match="comma-separated"):
            section_of(entry(aliases=("a,b",)), EXE)


class TestPresetPlan:
    def test_models_of_other_engines_are_left_out_with_the_reason(self):
        plan = Plan(model_id="flux", entries=(Entry(id="flux", argv=("sd-server",), footprint=Footprint("sd-server")),))
        served, sections, left = preset_plan(plan, "sd", EXE)
        assert (served.entries, sections) == ((), ())
        assert left == (Skip("flux", "a sd-server model: llama.cpp's router starts llama-server only "
                                     "(target: llama-swap serves it)"),)
        assert served.skips == left

    def test_an_entry_a_preset_cannot_carry_is_skipped_and_its_siblings_kept(self):
        plan = Plan(model_id="qwen3-8b", entries=(entry(), entry("--frobnicate", id="qwen3-8b-64k")),
                    skips=(Skip("qwen3-8b-1m", "too long"),))
        served, sections, left = preset_plan(plan, "llama", EXE)
        assert [s.id for s in sections] == ["qwen3-8b"] and [e.id for e in served.entries] == ["qwen3-8b"]
        assert [s.id for s in served.skips] == ["qwen3-8b-1m", "qwen3-8b-64k"]
        assert served.skips[1].reason.startswith("not in the preset: '--frobnicate' is not an argument")
        assert left == served.skips[1:]  # the run lists it: the llama-swap config would serve it


def load(entry_id: str, est: float, devices=None, model: str | None = None) -> Load:
    return Load(entry_id=entry_id, model_id=model or entry_id, est_vram_gb=est, devices=devices, size_gb=1.0,
                engine="llama.cpp")


CARD = (Device(0, 24.0, 20.0),)


class TestModelsMax:
    def test_any_n_must_fit_so_the_n_largest_are_checked(self):
        """10 + 8 fit the shared 20 GiB; 10 + 8 + 6 do not, although 8 + 6 + 5 would."""
        loads = [load("a", 10), load("b", 8), load("c", 6), load("d", 5)]
        assert models_max(loads, CARD) == 2

    def test_one_entry_alone_may_fill_the_card(self):
        assert models_max([load("a", 23), load("b", 1)], CARD) == 1

    def test_cpu_only_entries_cost_no_card(self):
        assert models_max([load("a", 0), load("b", 0), load("c", 12)], CARD) == 3

    def test_an_entry_above_the_card_still_runs_alone(self):
        assert models_max([load("a", 30)], CARD) == 1
        assert models_max([], CARD) == 1

    def test_entries_pinned_to_other_cards_do_not_compete(self):
        cards = (Device(0, 24.0, 20.0), Device(1, 24.0, 20.0))
        assert models_max([load("a", 15, (0,)), load("b", 15, (1,))], cards) == 2


def section(sid: str, *keys: tuple[str, str], aliases=(), env=()) -> Section:
    return Section(id=sid, keys=(("model", f"/m/{sid}.gguf"), *keys), aliases=aliases, env=env)


def render(sections, settings_block=None, loads=None, skips=()):
    loads = loads if loads is not None else [load(s.id, 5) for s in sections]
    return render_preset("; head\n", sections, skips, settings_block or {}, loads, CARD, EXE, "/srv/models.ini")


class TestRenderPreset:
    def test_shared_keys_go_to_star_and_the_rest_stays_in_sorted_sections(self):
        preset = render([section("b", ("ctx-size", "8192"), ("threads", "8")),
                         section("a", ("ctx-size", "4096"), ("threads", "8"))], skips=[("ab", '; SKIPPED "ab": x\n')])
        assert preset.text == (
            "; head\n"
            "; Start llama.cpp's router on it: /opt/llama/bin/llama-server --models-preset /srv/models.ini "
            "--models-max 2\n"
            "; --models-max 2: any 2 of these models fit together on GPU 0 (24 GiB)\n"
            "version = 1\n\n"
            "[*]\nthreads = 8\n\n"
            "[a]\nmodel = /m/a.gguf\nctx-size = 4096\n\n"
            '; SKIPPED "ab": x\n'
            "[b]\nmodel = /m/b.gguf\nctx-size = 8192\n\n")
        assert preset.models_max == 2  # two 5 GiB entries: both fit, and there are only 2
        assert check_preset_text(preset.text) == []

    def test_keys_that_size_a_model_stay_in_its_section(self):
        """`[*]` reaches the models of llama.cpp's own download cache too: a context, an offload, a
        fit switch or a device made for these models must not start those."""
        sized = (("ctx-size", "8192"), ("n-gpu-layers", "99"), ("fit", "off"), ("device", "CUDA0"),
                 ("cache-type-k", "q8_0"), ("flash-attn", "on"), ("parallel", "2"))
        text = render([section("a", *sized), section("b", *sized)]).text
        assert "[*]" not in text and all(text.count(f"{k} = {v}\n") == 2 for k, v in sized)

    def test_one_section_keeps_all_its_keys(self):
        assert "[*]" not in render([section("a", ("fit", "off"))]).text

    def test_the_model_path_never_moves_to_star(self):
        text = render([Section(id="a", keys=(("model", "/m/x.gguf"),)),
                       Section(id="a-64k", keys=(("model", "/m/x.gguf"),))]).text
        assert "[*]" not in text and text.count("model = /m/x.gguf") == 2

    def test_preloads_by_id_or_alias_load_on_startup(self):
        text = render([section("a", aliases=("qa",)), section("b")],
                      {"hooks": {"on_startup": {"preload": ["qa"]}}, "unloadTimeout": 12}).text
        assert "[a]\nmodel = /m/a.gguf\nload-on-startup = true\n" in text
        assert "[*]\nstop-timeout = 12\n" in text

    def test_a_preload_that_names_no_section_is_an_error(self):
        with pytest.raises(SwapgenError, match=r"llama_swap.hooks.on_startup.preload\[0\]: 'zz' is not a section"):
            render([section("a")], {"hooks": {"on_startup": {"preload": ["zz"]}}})

    def test_more_preloads_than_fit_together_is_an_error(self):
        with pytest.raises(SwapgenError, match=r"2 models to load at start, but only 1 fit"):
            render([section("a"), section("b")], {"hooks": {"on_startup": {"preload": ["a", "b"]}}},
                   loads=[load("a", 15), load("b", 15)])

    def test_router_variables_lead_the_command(self):
        preset = render([section("a", env=("CUDA_DEVICE_ORDER=PCI_BUS_ID",)), section("b")])
        assert preset.command == ("CUDA_DEVICE_ORDER=PCI_BUS_ID /opt/llama/bin/llama-server --models-preset "
                                  "/srv/models.ini --models-max 2")

    def test_two_values_of_one_router_variable_are_an_error(self):
        with pytest.raises(SwapgenError, match="one environment"):
            render([section("a", env=("X=1",)), section("b", env=("X=2",))])

    def test_the_same_input_gives_the_same_bytes(self):
        sections = [section("b", ("fit", "off")), section("a", ("fit", "off"))]
        assert render(sections).text == render(list(reversed(sections))).text

    def test_a_section_round_trips_through_its_fragment_record(self):
        s = section("a", ("fit", "off"), aliases=("x",), env=("A=1",))
        assert Section.from_json(s.to_json()) == s


def test_the_recorded_table_knows_every_flag_the_llama_emitter_spells():
    """`flags.llama.FLAG_KNOBS` names every flag the emitter writes or reads back."""
    table = recorded_table()
    assert sorted(f for f in FLAG_KNOBS if f not in table.by_flag) == []
