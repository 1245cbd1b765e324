"""Every document the code cites is in the repository: a maintainer who clones it can follow each
pointer. Cites name a repo doc (`docs/maintainers/backends.md#resolution-order`, a guide page
`docs/settings.md`, a README heading `README "A tour of the sample library"`) or an upstream source
(llama.cpp, vLLM, llama-swap files and functions), never a document kept outside the repo.

The user guide (docs/*.md, with the maintainer notes as its last section) is also a website, built
by Zensical from mkdocs.yml: every page is in the nav once, its links stay inside docs/, and the
build needs no network. CI builds it with `zensical build --strict` (.ci/run), which checks the
same links and anchors as the site renders them; the nav and absolute links, which Zensical 0.1
does not check, are checked here (docs/maintainers/guide-site.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
THIS = Path(__file__).resolve()
#: Where pointers live: the package, the tests, the benchmarks, the scripts and the task file.
SOURCES = sorted(
    p for p in [*ROOT.glob("autogen/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py"),
                *ROOT.glob("scripts/**/*.py"), ROOT / "dodo.py"]
    if p.is_file() and p.resolve() != THIS
)
#: The user guide's pages (docs/*.md); the maintainer notes are in docs/maintainers/.
GUIDE = sorted(DOCS.glob("*.md"))
#: Prose, which cites the same way: the README, the guide, the maintainer notes and the package map.
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
#: `README "Heading"` or `README's "Heading"`: a section of the README, by the start of its heading.
README_CITE = re.compile(r'README(?:\'s)?\s+"([^"\n]+)"')
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


@pytest.mark.parametrize("path", [*SOURCES, *PROSE], ids=_rel)
def test_every_cited_readme_section_exists(path):
    """A README section quoted by name is still in the README (the guide's pages took most of them)."""
    sections = headings(ROOT / "README.md")
    problems = [f'{_rel(path)}:{n}: README "{quoted}": no README heading starts so'
                for n, line in enumerate(path.read_text().splitlines(), 1) for quoted in README_CITE.findall(line)
                if not any(h.lower().startswith(quoted.lower()) for h in sections)]
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
    assert len(list(links(ROOT / "README.md"))) > 15
    assert sum(len(list(links(page))) for page in GUIDE) > 100


def test_readme_links_every_guide_page():
    """The README is where a reader starts: each page of the guide is one link away."""
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(ROOT / "README.md")}
    missing = [_rel(page) for page in GUIDE if page.resolve() not in linked]
    assert not missing, f"README.md links no {', '.join(missing)}"


class _MkDocsLoader(yaml.SafeLoader):
    """mkdocs.yml as data: a `!!python/...` tag (the slugify function) reads as its tag name."""


_MkDocsLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda _loader, suffix, _node: suffix)


def mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkDocsLoader)


def nav_pages(nav) -> list[str]:
    """The page files of mkdocs' nav, in order, sections flattened."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def test_every_page_is_in_the_nav_once():
    """No orphan page (the site would hide it) and no nav entry without its file."""
    pages = nav_pages(mkdocs_config()["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert len(pages) == len(set(pages)), f"mkdocs.yml lists a page twice: {pages}"
    assert sorted(pages) == on_disk, (f"not in mkdocs.yml's nav: {sorted(set(on_disk) - set(pages))}; "
                                      f"in the nav but not in docs/: {sorted(set(pages) - set(on_disk))}")
    notes = [p for p in pages if p.startswith("maintainers/")]
    assert pages[0] == "index.md" and pages[-len(notes):] == notes, "the maintainer notes are the nav's last section"


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=_rel)
def test_the_sites_pages_link_only_inside_docs(path):
    """The site holds docs/ only: a relative link out of it (to the README, to code) has no page there."""
    outside = [f"{_rel(path)}:{n}: ({t})" for n, t in links(path)
               if not re.match(r"[a-z][a-z0-9+.-]*:", t) and t.partition("#")[0]
               and not (path.parent / t.partition("#")[0]).resolve().is_relative_to(DOCS)]
    assert not outside, "name the file in backticks instead of linking it:\n" + "\n".join(outside)


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=_rel)
def test_no_heading_is_repeated_on_a_page(path):
    """GitHub numbers a repeated heading's anchor `-1`, MkDocs `_1`: a link to one would break on the other."""
    seen = [slug(h) for h in headings(path)]
    assert len(seen) == len(set(seen)), sorted({s for s in seen if seen.count(s) > 1})


def test_the_site_builds_strictly_without_network():
    """Only the built-in search plugin (Material's social and privacy plugins fetch), no web fonts,
    GitHub's anchors, every link problem a warning; the `docs` extra installs Zensical and CI
    builds with `--strict`."""
    config = mkdocs_config()
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False
    assert config["plugins"] == ["search"]
    (toc,) = [e["toc"] for e in config["markdown_extensions"] if isinstance(e, dict) and "toc" in e]
    assert toc["slugify"] == "object/apply:pymdownx.slugs.slugify"
    validation = config["validation"]
    assert {v for part in validation.values() for v in part.values()} == {"warn"}
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert {re.split(r"[<>=]", r)[0] for r in extra} == {"zensical"}
    assert re.search(r"^pip install -e '\.\[docs\]' && zensical build --strict", (ROOT / ".ci" / "run").read_text(),
                     re.MULTILINE)


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
