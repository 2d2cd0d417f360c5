"""What a reader sees of pte_lab's HTML where ``<style>`` is stripped: only inline styles apply there."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "col", "area", "base", "source"}


def strip_styles(html: str) -> str:
    """The HTML as a viewer that drops ``<style>`` elements receives it."""
    return re.sub(r"<style>.*?</style>", "", html, flags=re.S)


class _Shown(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # per open element: hidden by its own inline style
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        style = (dict(attrs).get("style") or "").replace(" ", "").lower()
        self.stack.append("display:none" in style or tag == "style")

    def handle_endtag(self, tag):
        if tag not in _VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not any(self.stack):
            self.text.append(data)


def shown_without_css(html: str) -> str:
    """The text that shows once ``<style>`` is stripped (whitespace runs made one space)."""
    p = _Shown()
    p.feed(strip_styles(html))
    p.close()
    return " ".join("".join(p.text).split())


def fallback_of(html: str) -> str:
    """The text fallback's own text, as :func:`shown_without_css` spaces it."""
    (pre,) = re.findall(r"<pre class='pte-text-fallback'>(.*?)</pre>", html, flags=re.S)
    import html as _html

    return " ".join(_html.unescape(pre).split())


def one_view_without_css(html: str) -> bool:
    """Exactly the text fallback shows without styles: none of the rich view does."""
    return shown_without_css(html) == fallback_of(html) != ""
