"""ik_llama.cpp and llama.cpp rows: each command in its own build's words, never the other's.

Every profile kind (ctx tiers, named profiles, vision, LoRA, draft), every llama knob and every
ik_llama.cpp option is emitted for a DeepSeek-style MLA model, a MoE model and a dense one, on
an ik_llama.cpp row and on a llama.cpp row, and each argv is walked against the recorded table
of its own build (`flags.ik_llama_015`, `flags.llama_b11434`): every flag is one the build takes,
with the number of values it takes, and none is a name only the other build has.
"""

from __future__ import annotations

import attrs
import pytest

from autogen.discovery.rows import Adapter
from autogen.emit.llama import emit_llama
from autogen.engines import Engine
from autogen.flags.ik_llama import IK
from autogen.flags.llama import MAINLINE, LlamaFlags
from autogen.metadata.kvcost import kv_cost
from autogen.resolve.backends import Resolved
from autogen.resolve.context import DraftModel, EmitContext
from autogen.settings.schema import BackendRow, Override, Profile, Settings
from autogen.sizing.ik_llama_memory import ik_allocations
from autogen.sizing.llama_memory import Launch
from tests.builders import context, meta

IK_EXE = "/opt/ik/bin/llama-server"
MM = "/models/mmproj-F16.gguf"
ONLY_IK = frozenset(IK.table.by_flag) - frozenset(MAINLINE.table.by_flag)
ONLY_MAINLINE = frozenset(MAINLINE.table.by_flag) - frozenset(IK.table.by_flag)

MLA = meta(arch="deepseek2", block_count=27, embedding_length=2048, head_count=16, head_count_kv=(1,) * 27,
           key_length=192, value_length=128, kv_lora_rank=512, qk_rope_head_dim=64, context_length=163840,
           expert_count=64, expert_used_count=6, expert_feed_forward_length=1408, leading_dense_blocks=1,
           feed_forward_length=10944, vocab_size=102400, expert_tensor_bytes=9 << 30, tensor_bytes=10 << 30)
MOE = meta(arch="qwen3moe", block_count=48, embedding_length=2048, head_count=32, head_count_kv=(4,) * 48,
           context_length=40960, expert_count=128, expert_used_count=8, expert_feed_forward_length=768,
           vocab_size=151936, expert_tensor_bytes=15 << 30, tensor_bytes=16 << 30)
DENSE = meta()
#: One token list for each model and its draft (speculative decoding needs the very same).
MODELS = {name: (attrs.evolve(m, tokenizer_model="gpt2", vocab_digest=f"{name}-vocab"), size)
          for name, (m, size) in {"mla": (MLA, 10.0), "moe": (MOE, 16.0), "dense": (DENSE, 4.6)}.items()}

OPTIONS = {
    "defaults": {},
    "tight": {"vram_budget_gb": 6.0},
    "knobs": {"kv_type": "q8_0", "parallel": 2, "flash_attn": "on", "threads": 8, "ngl": 10},
    "fa-off": {"flash_attn": "off"},
    "n_cpu_moe": {"n_cpu_moe": 12},
    "ik": {"mla": 1, "fused_moe": False, "run_time_repack": True},
    "mla0": {"mla": 0, "flash_attn": "off"},
    "profiles": {"ctx_profiles": (8192, 65536),
                 "profiles": (Profile(name="vision"), Profile(name="fast", kv_type="q8_0", mla=2, parallel=2),
                              Profile(name="cpu", ngl=0, run_time_repack=True))},
}
IK_EXTRA = ("-amb", "512", "-mla", "2", "-no-fmoe", "-rtr", "--cpu-moe", "-ger", "-ctk", "q8_0", "-ctv", "q8_0")
MAINLINE_EXTRA = ("--swa-full", "-kvu", "-ctk", "q8_0", "-ctv", "q8_0", "--n-cpu-moe", "3")


def ik_context(ctx: EmitContext) -> EmitContext:
    row = BackendRow(id="ik-cuda", kind="ik_llama", path=IK_EXE, build="cuda")
    return attrs.evolve(ctx, backend=Resolved(engine=Engine.IK_LLAMA.value, exe=IK_EXE, row=row, why="pinned"))


def build(model: str, option: str, ik: bool, extra: tuple[str, ...] = ()) -> EmitContext:
    m, size = MODELS[model]
    values = dict(OPTIONS[option])
    budget = values.pop("vram_budget_gb", 22.0)
    override = Override(match="*", extra_args=extra, draft="/models/draft.gguf", **values)
    draft = DraftModel(path="/models/draft.gguf", meta=attrs.evolve(m, block_count=2, head_count_kv=m.head_count_kv[:2]),
                       size_bytes=1 << 28,
                       why="same vocabulary")
    ctx = context(m, size_gb=size, budget=budget, override=override, mmproj=MM, mmproj_bytes=1 << 28,
                  loras=(Adapter(path="/models/style.gguf", name="style", kind="gguf", size_bytes=1 << 24),))
    ctx = attrs.evolve(ctx, kv=kv_cost(m), draft=draft, settings=Settings(roots=("/models",)))
    return ik_context(ctx) if ik else ctx


def walk(argv: tuple[str, ...], words: LlamaFlags) -> list[str]:
    """The flags of `argv` past the program, each checked against the table; the problems."""
    problems, i = [], 1
    while i < len(argv):
        option = words.table.by_flag.get(argv[i])
        if option is None:
            problems.append(f"{argv[i]}: not an option of {words.table.build}")
            i += 1
            continue
        taken = 0 if argv[i] in option.negatives else option.values
        values = argv[i + 1:i + 1 + taken]
        if len(values) < taken or any(v.startswith("-") and not v.lstrip("-").isdigit() for v in values):
            problems.append(f"{argv[i]}: takes {taken} value(s), got {list(values)}")
        i += 1 + taken
    return problems


CASES = [(model, option, ik) for model in MODELS for option in OPTIONS for ik in (True, False)]


@pytest.mark.parametrize("model, option, ik", CASES, ids=[f"{m}-{o}-{'ik' if ik else 'llama'}" for m, o, ik in CASES])
def test_every_entry_speaks_its_own_build(model, option, ik):
    plan = emit_llama(build(model, option, ik))
    assert plan.entries, plan.skips
    words, foreign = (IK, ONLY_MAINLINE) if ik else (MAINLINE, ONLY_IK)
    for entry in plan.entries:
        assert walk(entry.argv, words) == [], entry.id
        assert not foreign & set(entry.argv), (entry.id, sorted(foreign & set(entry.argv)))


@pytest.mark.parametrize("model", list(MODELS))
def test_extra_args_in_ik_words_are_read_and_kept(model):
    plan = emit_llama(build(model, "defaults", True, IK_EXTRA))
    for entry in plan.entries:
        assert walk(entry.argv, IK) == [], entry.id
        start = entry.argv.index(IK_EXTRA[0])
        assert entry.argv[start:start + len(IK_EXTRA)] == IK_EXTRA
        assert entry.argv.count("-mla") == 1 and "--n-cpu-moe" not in entry.argv


@pytest.mark.parametrize("model", list(MODELS))
def test_extra_args_in_llama_cpp_words_stay_on_llama_cpp(model):
    plan = emit_llama(build(model, "defaults", False, MAINLINE_EXTRA))
    for entry in plan.entries:
        assert walk(entry.argv, MAINLINE) == [], entry.id


def test_an_ik_command_carries_ik_words_and_no_fit():
    entry = emit_llama(build("mla", "ik", True)).entries[0]
    argv = entry.argv
    assert argv[0] == IK_EXE and "-fit" not in argv and "--log-disable" in argv
    assert argv[argv.index("-mla") + 1] == "1" and "-no-fmoe" in argv and "-rtr" in argv
    assert dict(entry.metadata)["engine"] == "ik_llama.cpp"
    assert entry.comment[0].startswith("ik_llama · deepseek2 · ")


def test_ik_options_on_a_llama_cpp_row_are_left_out_with_a_note():
    plan = emit_llama(build("mla", "ik", False))
    (entry, *_) = plan.entries
    assert not {"-mla", "-no-fmoe", "-rtr"} & set(entry.argv)
    notes = "\n".join(plan.notes)
    for key in ("mla: 1", "fused_moe: false", "run_time_repack: true"):
        assert f"{key} is an ik_llama.cpp option; llama.cpp has no such flag, left out" in notes


def test_the_draft_profile_uses_ik_llama_cpps_draft_words():
    entries = {e.id: e.argv for e in emit_llama(build("dense", "defaults", True)).entries}
    draft = entries["llama-8b-draft"]
    assert draft[draft.index("--draft-max") + 1] == "16" and draft[draft.index("--draft-min") + 1] == "0"
    assert "--spec-type" not in draft and "--spec-draft-n-max" not in draft


def test_the_mla_cache_is_sized_by_ik_llama_cpps_rules():
    """The entry's KV is ik_llama.cpp's latent at -mla 3 (576 f16 per layer and token), and
    -mla 0 with flash attention off is its per-head K/V."""
    for option, mla, fa in (("defaults", 3, True), ("mla0", 0, False)):
        entry = emit_llama(build("mla", option, True)).entries[0]
        ctx = dict(entry.metadata)["ctx"]
        expected = ik_allocations(MODELS["mla"][0], Launch(ctx=ctx, mla=mla, flash_attn=fa)).kv_total
        assert entry.footprint.memory.devices[0].context + (entry.footprint.memory.host.context
                                                            if entry.footprint.memory.host else 0) == expected


@pytest.mark.parametrize("extra, message", [
    (("--fit",), "--fit places layers by the memory free at start"),
    (("-mla", "5"), "-mla '5': expected 0, 1, 2, 3 (0 to 3)"),
])
def test_ik_words_swapgen_cannot_size_are_refused_with_the_reason(extra, message):
    plan = emit_llama(build("mla", "defaults", True, extra))
    assert plan.skips and message in plan.skips[0].reason


def test_an_architecture_ik_llama_cpp_does_not_load_is_skipped():
    m = meta(arch="lfm2")
    ctx = ik_context(context(m))
    plan = emit_llama(ctx)
    assert not plan.entries
    assert "architecture lfm2: ik-llama-cpp-python 0.1.5 (ik_llama.cpp) has no loader for it" in plan.skips[0].reason


def test_a_profile_takes_over_an_inherited_ik_flag_of_its_meaning():
    """A profile's `mla` replaces the override's `-mla` in extra_args (read in ik_llama.cpp's
    words), so the command has one, the profile's."""
    ctx = build("mla", "defaults", True, ("-mla", "1", "-amb", "256"))
    ov = attrs.evolve(ctx.override, profiles=(Profile(name="latent2", mla=2),))
    entries = {e.id: e.argv for e in emit_llama(attrs.evolve(ctx, override=ov)).entries}
    base, latent = entries["llama-8b"], entries["llama-8b-latent2"]
    assert base.count("-mla") == 1 and base[base.index("-mla") + 1] == "1"
    assert latent.count("-mla") == 1 and latent[latent.index("-mla") + 1] == "2" and "-amb" in latent
