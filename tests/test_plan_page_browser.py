"""The plan page in a real browser: headless Chromium (Debian's `chromium`) opens it from
`file://`, and the DOM it rendered shows each model's figures as `swapgen show --json` gives them,
for the sample library and a fleet; the page makes no request but its own file, reads the same
with JavaScript off, prints, and writes the screenshot the user guide shows
(docs/images/plan-page.png). Slow: scripts/setup-slow-checks.sh installs Chromium."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from autogen.commands import sample
from tests import page_check
from tests.browser import SETUP, Browser, chromium
from tests.fleet_fixtures import build_fleet
from tests.test_plan_page import MATRIX, swapgen

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium() is None, reason=f"needs Chromium: {SETUP}")]

ROOT = Path(__file__).resolve().parent.parent
#: The screenshot the guide shows, and the part of the page it takes (CSS pixels).
SCREENSHOT = ROOT / "docs" / "images" / "plan-page.png"
SHOT_WIDTH, SHOT_HEIGHT = 1200, 1500


def rendered(settings: Path, browser: Browser) -> tuple[dict, str]:
    """Generate, write the page, open it: (the report's JSON, the DOM Chromium rendered)."""
    assert swapgen("--settings", str(settings))[0] == 0
    assert swapgen("--settings", str(settings), "report")[0] == 0
    data = json.loads(swapgen("--settings", str(settings), "report", "--json")[1])
    page = settings.parent / "report.html"
    browser.open(page)
    assert browser.requests() == [page.resolve().as_uri()], "the page fetched something besides itself"
    return data, browser.dom()


def check_against_show(settings: Path, data: dict, dom: str, host_prefix: bool = False) -> int:
    """Every figure of the rendered DOM is the report's; each model's are its `show --json`'s."""
    shown = page_check.figures(dom)
    for path, value, _ in shown:
        assert page_check.at(data, path) == value, path
    checked = 0
    for i, model in enumerate(data["models"]):
        model_id = f"{model['host']}/{model['id']}" if host_prefix and model["host"] else model["id"]
        show = json.loads(swapgen("--settings", str(settings), "show", model_id, "--json")[1])
        prefix = f"models.{i}."
        for path, value, _ in shown:
            if path.startswith(prefix):
                assert page_check.at(show, path[len(prefix):]) == value, (model_id, path)
                checked += 1
    return checked


@pytest.fixture(scope="module")
def browser():
    with Browser(width=SHOT_WIDTH) as b:
        yield b


def test_the_sample_library(tmp_path, browser):
    sample.build(tmp_path / "sample-library")
    settings = tmp_path / "swapgen.yaml"
    shutil.copy(ROOT / "swapgen.yaml", settings)
    data, dom = rendered(settings, browser)
    assert check_against_show(settings, data, dom) > 200
    skipped = {u["id"]: u["reason"] for u in data["unserved"] if u["kind"] == "skipped"}
    on_page = {text for _, _, text in page_check.figures(dom)}
    assert skipped and all(reason in on_page for reason in skipped.values())


def test_a_fleet(tmp_path, browser):
    front = build_fleet(tmp_path, multi_node=None)
    data, dom = rendered(front, browser)
    assert {h["name"] for h in data["hosts"]} == {"gpu-a", "gpu-b"}
    assert check_against_show(front, data, dom, host_prefix=True) > 100


def test_it_reads_without_javascript_and_prints(tmp_path, browser):
    add = tmp_path / "sample-library"
    sample.build(add)
    settings = tmp_path / "swapgen.yaml"
    shutil.copy(ROOT / "swapgen.yaml", settings)
    _, with_script = rendered(settings, browser)
    browser.call("Emulation.setScriptExecutionDisabled", value=True)
    try:
        browser.open(settings.parent / "report.html")
        assert browser.requests() == [(settings.parent / "report.html").resolve().as_uri()]
        # with scripts off the DOM cannot be read by a script: the page's own bytes are what shows
        pdf = base64.b64decode(browser.call("Page.printToPDF", printBackground=True)["data"])
    finally:
        browser.call("Emulation.setScriptExecutionDisabled", value=False)
    html = (settings.parent / "report.html").read_text()
    assert page_check.figures(html) == page_check.figures(with_script)
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") > 1


def test_the_guides_screenshot(tmp_path, browser):
    """The two-card sample library planned as a matrix, light mode, the page's first screens."""
    sample.build(tmp_path / "sample-library")
    settings = tmp_path / "matrix.settings.yaml"
    settings.write_text(MATRIX)
    rendered(settings, browser)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    browser.screenshot(SCREENSHOT, top=0, height=SHOT_HEIGHT)
    assert SCREENSHOT.read_bytes().startswith(b"\x89PNG")
