"""Reading the plan page back: every figure it shows (`data-f`: where it is in the report's JSON,
`data-v`: its value there, and the text shown), and what the page would fetch. Shared by the page
tests and the real-browser check (`test_plan_page_browser`), which reads the DOM Chromium rendered."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

GIB = 1 << 30
#: Void elements: no end tag, no text of their own.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
        "circle", "line", "polyline", "path", "rect"}


class _Figures(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[list] = []  # [tag, path, value, text parts]
        self.found: list[tuple[str, object, str]] = []
        self.fetches: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "srcset", "poster", "data", "action", "formaction"):
            if attrs.get(name):
                self.fetches.append(f"<{tag} {name}={attrs[name]}>")
        if tag == "link" or (tag == "script" and attrs.get("src")):
            self.fetches.append(f"<{tag} {attrs}>")
        href = attrs.get("href") or attrs.get("xlink:href")
        if href and not href.startswith("#"):
            self.fetches.append(f"<{tag} href={href}>")
        if "style" in attrs and re.search(r"url\(|@import", attrs["style"] or ""):
            self.fetches.append(f"<{tag} style={attrs['style']}>")
        entry = [tag, attrs.get("data-f"), attrs.get("data-v"), []]
        if tag in VOID or self.get_starttag_text().endswith("/>"):
            if entry[1] is not None:
                self.found.append((entry[1], json.loads(entry[2]) if entry[2] is not None else "", ""))
            return
        self.open.append(entry)

    def handle_endtag(self, tag):
        while self.open:
            entry = self.open.pop()
            text = "".join(entry[3])
            if self.open:
                self.open[-1][3].append(text)
            if entry[1] is not None:  # a string figure is its text
                self.found.append((entry[1], json.loads(entry[2]) if entry[2] is not None else text, text.strip()))
            if entry[0] == tag:
                break

    def handle_data(self, data):
        if self.open:
            self.open[-1][3].append(data)


def figures(html: str) -> list[tuple[str, object, str]]:
    """(path in the report's JSON, value there, text shown) of every figure on the page: the value is
    `data-v`, or for a string the text itself."""
    parser = _Figures()
    parser.feed(html)
    parser.close()
    return parser.found


def fetches(html: str) -> list[str]:
    """Everything the page would load from elsewhere: sources, links, stylesheet URLs, imports."""
    parser = _Figures()
    parser.feed(html)
    parser.close()
    inline_css = " ".join(re.findall(r"<style>(.*?)</style>", html, re.S))
    return parser.fetches + re.findall(r"url\([^)]*\)|@import[^;]*", inline_css)


def at(data, path: str):
    """The value at a dotted path (`models.3.entries.0.vram`) of a JSON document."""
    for key in path.split("."):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def renderings(value) -> set[str]:
    """The texts a value may be shown as: itself, GiB to two decimals (signed for a difference),
    with thousands separators, Go's shortest form."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, bool) or value is None:
        return {json.dumps(value)}
    if isinstance(value, int):
        return {str(value), f"{value:,}", f"{value / GIB:.2f}", f"{value / GIB:+.2f}"}
    return {f"{value:g}", f"{value:.2f}"}
