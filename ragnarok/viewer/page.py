"""``ragnarok view --html``: one self-contained page (inline CSS and JS, nothing fetched). The run's data is
embedded as JSON and every text reaches the page through ``textContent``, never as markup; a topic's answer is
built when it is expanded, so a 301-topic run of two runs opens at once."""

from __future__ import annotations

from importlib.resources import files

from ragnarok.viewer.model import View, view_json

MARK = "__DATA__"


def page(view: View) -> bytes:
    """The HTML page of ``view`` (UTF-8)."""
    template = files("ragnarok.viewer").joinpath("page.html").read_text(encoding="utf-8")
    before, _, after = template.partition(MARK)
    return (before + view_json(view) + after).encode("utf-8")
