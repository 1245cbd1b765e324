"""Every document the code cites is in the repository: a maintainer who clones it can follow each
pointer. Cites name a repo doc (`docs/maintainers/backends.md#resolution-order`) or an upstream source
(llama.cpp, vLLM, llama-swap files and functions), never a document kept outside the repo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
THIS = Path(__file__).resolve()
#: Where pointers live: the package, the tests, the benchmarks, the scripts and the task file.
SOURCES = sorted(
    p for p in [*ROOT.glob("autogen/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py"),
                *ROOT.glob("scripts/**/*.py"), ROOT / "dodo.py"]
    if p.is_file() and p.resolve() != THIS
)
#: Prose, which cites the same way: the user guide (README), the docs and the package map.
PROSE = sorted([ROOT / "README.md", *DOCS.rglob("*.md"), ROOT / "autogen" / "README.md"])
#: Every Markdown file of the repository whose links must resolve.
MARKDOWN = sorted({*PROSE, *ROOT.glob("tools/**/*.md"), *ROOT.glob("scripts/**/*.md")})
#: `[text](target)` and `![alt](target)`; the target up to a space or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]\n]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")

#: Spellings of documents that are not in the repository (design notes and research kept
#: elsewhere): a section sign, their file names, and the phrases that cited them.
OUTSIDE = [
    ("a section sign", re.compile(r"§")),
    ("a spec-*.md document", re.compile(r"\bspec-(backends|classes|discovery)", re.I)),
    ("a research document", re.compile(r"\b(anchors|ecosystem)(\.md\b|\s+(trap|§)|\s+§)", re.I)),
    ("a product/style/layout spec", re.compile(r"\b(PRODUCT|STYLE|LAYOUT)(\.md\b|\s+§)")),
    ("the reference folder", re.compile(r"\breference/|\breference\s+(§|spec\b|worked\b|example\b)", re.I)),
    ("the seed notes", re.compile(r"\bseed(\s+`?backends\.md|'s\b|\s+(rule|acceptance)\b)", re.I)),
    ("a path outside the repository", re.compile(r"/work/")),
]

#: `docs/<file>.md` or `docs/<folder>/<file>.md` with an optional `#anchor` or `"Heading"`; not part of a longer path.
DOC_CITE = re.compile(r'(?<![\w./-])docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+)|\s+"([^"\n]+)")?')
#: A `docs/…` path right after one of these names is that project's own documentation.
UPSTREAM = re.compile(r"(llama\.cpp|vllm|audio\.cpp|llama-swap|sd\.cpp|stable-diffusion\.cpp|huggingface_hub)"
                      r"(\S*|'s)[\s`'\"(]*$", re.I)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path: Path) -> list[str]:
    """Heading texts of a Markdown file, outside fenced code."""
    found, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(m.group(1))
    return found


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the file's headings (a repeated heading gets `-1`, `-2`, …)."""
    seen: dict[str, int] = {}
    out = set()
    for text in headings(path):
        base = slug(text)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def cites(path: Path):
    """(line number, file, anchor or None, quoted heading or None) per repo-doc citation."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for m in DOC_CITE.finditer(line):
            if UPSTREAM.search(line[: m.start()]):
                continue
            yield number, m.group(1), m.group(2), m.group(3)


def test_sources_are_found():
    names = {_rel(p) for p in SOURCES}
    assert {"autogen/resolve/backends.py", "tests/test_layout.py", "benchmarks/bench_library.py"} <= names


@pytest.mark.parametrize("path", [*SOURCES, *PROSE], ids=_rel)
def test_no_document_outside_the_repository_is_cited(path):
    found = [f"{_rel(path)}:{n}: {what}: {line.strip()}"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             for what, pattern in OUTSIDE if pattern.search(line)]
    assert not found, "cite a docs/*.md heading or an upstream source instead:\n" + "\n".join(found)


@pytest.mark.parametrize("path", [*SOURCES, *PROSE], ids=_rel)
def test_every_cited_doc_and_heading_exists(path):
    problems = []
    for number, name, anchor, quoted in cites(path):
        doc = DOCS / name
        where = f"{_rel(path)}:{number}: docs/{name}"
        if not doc.is_file():
            problems.append(f"{where}: no such file")
        elif anchor and anchor not in anchors(doc):
            problems.append(f"{where}#{anchor}: no such heading (anchors: {', '.join(sorted(anchors(doc)))})")
        elif quoted and not any(h.lower().startswith(quoted.lower()) for h in headings(doc)):
            problems.append(f'{where} "{quoted}": no heading starts so')
    assert not problems, "\n".join(problems)


def links(path: Path):
    """(line number, target) of every Markdown link outside fenced code."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield number, m.group(1)


def broken_link(path: Path, target: str) -> str | None:
    """Why a link from `path` does not resolve, or None. Web links are not fetched."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None
    file, _, anchor = target.partition("#")
    dest = (path.parent / file).resolve() if file else path
    if not dest.exists():
        return "no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"no heading #{anchor} in {_rel(dest)}"
    return None


@pytest.mark.parametrize("path", MARKDOWN, ids=_rel)
def test_every_link_and_anchor_resolves(path):
    """README's contents, the docs' cross-references, a link to a file: each lands somewhere."""
    problems = [f"{_rel(path)}:{n}: ({t}) {why}" for n, t in links(path) if (why := broken_link(path, t))]
    assert not problems, "\n".join(problems)


def test_readme_links_are_checked():
    assert len(list(links(ROOT / "README.md"))) > 30


def test_the_package_map_names_every_stage_and_doc():
    readme = (ROOT / "autogen" / "README.md").read_text()
    stages = sorted(p.name for p in (ROOT / "autogen").iterdir() if (p / "__init__.py").is_file())
    leaves = sorted(p.stem for p in (ROOT / "autogen").glob("*.py") if p.stem != "__init__")
    missing = [f"{s}/" for s in stages if f"`{s}/`" not in readme] + [f"{m}.py" for m in leaves
                                                                     if f"`{m}.py`" not in readme]
    missing += [f"docs/maintainers/{d.name}" for d in (DOCS / "maintainers").glob("*.md")
                if f"docs/maintainers/{d.name}" not in readme]
    assert not missing, f"autogen/README.md does not mention: {', '.join(missing)}"


class TestTheChecksThemselves:
    def test_outside_spellings_are_caught(self):
        for text in ("reference §4.4", "spec-backends-vllm-hf.md §3.10", "spec-classes.md §4",
                     "spec-discovery-generate.md §2", "anchors.md §1.6", "ecosystem.md trap 6", "PRODUCT §3.2",
                     "seed backends.md", "STYLE §4", "reference/ecosystem.md", "the seed's choice"):
            assert any(p.search(text) for _, p in OUTSIDE), text

    def test_innocent_english_passes(self):
        for text in ("macro 'v' contains self-reference", "is_reference_edit(name)", "--seed 1", "seed_oss",
                     "a reference clip", "routing references unknown model", "_check_references(doc)"):
            assert not any(p.search(text) for _, p in OUTSIDE), text

    def test_slugs_follow_github(self):
        assert slug("llama.cpp's `--fit`") == "llamacpps---fit"
        assert slug("config.json → metadata") == "configjson--metadata"
        assert slug("`${PORT}` and the proxy") == "port-and-the-proxy"
        assert slug("Image (sd-server)") == "image-sd-server"

    def test_broken_links_and_anchors_are_caught(self, tmp_path):
        (tmp_path / "a.md").write_text("# Top\n## The part\n[ok](#the-part) [bad](#nope) [f](b.md) [web](https://x.invalid/y)\n"
                                       "`[not](a-link.md)`\n```\n[in code](gone.md)\n```\n")
        found = {t: broken_link(tmp_path / "a.md", t) for _, t in links(tmp_path / "a.md")}
        assert found == {"#the-part": None, "#nope": f"no heading #nope in {tmp_path / 'a.md'}", "b.md": "no such file",
                         "https://x.invalid/y": None}

    def test_upstream_docs_paths_are_not_repo_cites(self, tmp_path):
        f = tmp_path / "m.py"
        f.write_text("# llama.cpp docs/build.md, audio.cpp's `docs/integrators.md`, vLLM `docs/features/x.md`\n"
                     "# docs/maintainers/sizing.md#vllm-kv-cache-size\n")
        assert [(n, name, a) for n, name, a, _ in cites(f)] == [(2, "maintainers/sizing.md", "vllm-kv-cache-size")]
