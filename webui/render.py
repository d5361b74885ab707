"""HTML for answers, errors and reveals. Every piece of corpus or model text goes through ``html.escape``.

An answer is its cited sentences; each citation is a focusable ``<span tabindex="0">`` whose tooltip (CSS:
shown on hover and on keyboard focus) holds the cited segment's title, text and URL. :data:`HEAD` adds the two
behaviours CSS cannot: a mouse click does not focus a citation (so its tooltip does not stay open after the
pointer leaves), and Escape hides an open tooltip until the pointer leaves or focus moves.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlparse

from ragnarok.arena.pool import PipelineId

TIP_CHARS = 600

CSS = """
.rg-pane { min-height: 6em; }
.rg-answer p { margin: 0 0 .6em 0; line-height: 1.5; }
.rg-cite { position: relative; display: inline-block; margin-left: .15em; padding: 0 .25em;
  border-radius: 4px; font-size: .8em; vertical-align: super; cursor: help;
  background: #e0e7ff; color: #1e3a8a; }
.rg-cite:focus { outline: 2px solid #1d4ed8; }
.rg-tip { display: none; position: absolute; z-index: 1000; left: 0; top: 1.6em; width: 26em;
  max-width: calc(100vw - 16px); box-sizing: border-box;
  padding: .6em .8em; border-radius: 6px; background: #111827; color: #f9fafb; font-size: .95rem;
  line-height: 1.35; text-align: left; white-space: normal; box-shadow: 0 4px 14px rgba(0,0,0,.3); }
.rg-cite:hover .rg-tip, .rg-cite:focus .rg-tip, .rg-cite:focus-within .rg-tip { display: block; }
.rg-cite.rg-dismissed .rg-tip { display: none !important; }
.rg-cite .rg-tip, .rg-cite .rg-tip * { color: #f9fafb !important; text-align: left !important; }
.rg-tip-title { display: block; font-weight: 600; margin-bottom: .3em; }
.rg-tip-text { display: block; margin-bottom: .3em; }
.rg-cite .rg-tip .rg-tip-url, .rg-cite .rg-tip .rg-tip-url a { display: block; color: #93c5fd !important;
  word-break: break-all; }
.rg-error { padding: .8em; border-radius: 6px; background: #fef2f2; color: #991b1b;
  border: 1px solid #fecaca; }
.rg-empty { color: #6b7280; font-style: italic; }
.rg-reveal { padding: .6em .8em; border-radius: 6px; background: #f0fdf4; border: 1px solid #bbf7d0; }
.rg-reveal-failed { background: #fef2f2; border-color: #fecaca; }
.rg-board table { border-collapse: collapse; font-size: .9em; }
.rg-board th, .rg-board td { border: 1px solid #d1d5db; padding: .25em .5em; text-align: left; }
.rg-board td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.rg-board code, .rg-reveal code { white-space: normal; overflow-wrap: normal; word-break: normal; }
.rg-intervals-narrow { display: none; }
.rg-wait { padding: .8em; color: #374151; font-variant-numeric: tabular-nums; }
.rg-spinner { display: inline-block; width: .8em; height: .8em; margin-right: .4em; border-radius: 50%;
  border: 2px solid #c7d2fe; border-top-color: #1d4ed8; animation: rg-spin 1s linear infinite; }
@keyframes rg-spin { to { transform: rotate(360deg); } }
.rg-streaming .rg-stream-text { margin: 0 0 .6em 0; line-height: 1.5; white-space: pre-wrap; }
.rg-caret { display: inline-block; width: .5em; height: 1em; margin-left: .1em; vertical-align: text-bottom;
  background: #1d4ed8; animation: rg-blink 1s steps(2, start) infinite; }
@keyframes rg-blink { to { visibility: hidden; } }
.rg-timing { margin: .3em 0 0 0; color: #6b7280; font-size: .85em; font-variant-numeric: tabular-nums; }
.rg-scroll { max-width: 100%; overflow-x: auto; }
.rg-sides { display: flex; flex-wrap: wrap; gap: 1em; }
.rg-side { flex: 1 1 22em; min-width: 0; }
.rg-provisional { color: #92400e; font-style: italic; }
.rg-row-provisional td { color: #6b7280; }
.rg-note { color: #6b7280; font-size: .9em; }
.rg-intervals { max-width: 100%; height: auto; }
@media (max-width: 640px) {
  .rg-topic-row { flex-wrap: wrap !important; }
  .rg-topic-row > .form { flex: 1 1 100% !important; min-width: 100% !important; }
  .rg-topic-row > button { flex: 1 1 40% !important; min-width: 0 !important; }
  .rg-panes { flex-direction: column !important; }
  .rg-panes > * { min-width: 0 !important; width: 100% !important; }
  .rg-board table { font-size: .8em; }
  /* names wrap between words only (never "extractiv|e"); a table wider than the screen scrolls sideways */
  .rg-intervals-wide { display: none; }  /* the stacked plot instead: labels above their lines */
  .rg-intervals-narrow { display: block; width: 100%; max-width: 26em; }
  #rg-json, #rg-json * { white-space: pre-wrap !important; overflow-wrap: anywhere !important; }
  .tab-container button { padding-left: .3em !important; padding-right: .3em !important; font-size: .85em !important; }
}
"""

#: Inserted in the page's ``<head>``: citations shown by the pointer or the keyboard, dismissed with Escape.
HEAD = """<script>
(() => {
  if (window.__rgCites) return;
  window.__rgCites = true;
  const cite = (node) => (node && node.closest ? node.closest(".rg-cite") : null);
  // a click on a citation does not focus it: its tooltip follows the pointer and closes when it leaves
  document.addEventListener("mousedown", (e) => {
    if (cite(e.target) && !e.target.closest("a")) e.preventDefault();
  }, true);
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    document.querySelectorAll(".rg-cite").forEach((c) => {
      if (c.matches(":hover, :focus, :focus-within")) c.classList.add("rg-dismissed");
    });
    const active = cite(document.activeElement);
    if (active) active.blur();
  });
  // a tooltip is kept inside the viewport: shifted left (or right) by what would run off its edge
  const place = (c) => {
    const tip = c.querySelector(".rg-tip");
    if (!tip) return;
    tip.style.transform = "";
    const r = tip.getBoundingClientRect();
    if (!r.width) return;
    const edge = 8, room = document.documentElement.clientWidth;
    let dx = 0;
    if (r.right > room - edge) dx = room - edge - r.right;
    if (r.left + dx < edge) dx = edge - r.left;
    if (dx) tip.style.transform = `translateX(${Math.round(dx)}px)`;
  };
  const placeSoon = (c) => { place(c); requestAnimationFrame(() => place(c)); };
  document.addEventListener("mouseover", (e) => { const c = cite(e.target); if (c) placeSoon(c); });
  document.addEventListener("focusin", (e) => {
    const c = cite(e.target);
    if (c) { c.classList.remove("rg-dismissed"); placeSoon(c); }
  });
  document.addEventListener("mouseout", (e) => {
    const c = cite(e.target);
    if (c && !c.contains(e.relatedTarget)) c.classList.remove("rg-dismissed");
  });
})();
</script>"""


def _url(url: str | None) -> str:
    if not url:
        return ""
    if urlparse(url).scheme in ("http", "https"):
        return (
            f'<span class="rg-tip-url"><a href="{escape(url, quote=True)}" target="_blank" '
            f'rel="noopener noreferrer nofollow">{escape(url)}</a></span>'
        )
    return f'<span class="rg-tip-url">{escape(url)}</span>'


def citation(number: int, docid: str, segment: dict[str, Any]) -> str:
    """``[number]`` as a focusable element with the segment's title, text and URL in its tooltip."""
    title = segment.get("title") or docid
    text = segment.get("segment") or segment.get("contents") or ""
    if len(text) > TIP_CHARS:
        text = text[:TIP_CHARS].rstrip() + " …"
    return (
        f'<span class="rg-cite" tabindex="0" role="note" aria-label="source {number}: {escape(title)}">'
        f'[{number}]<span class="rg-tip" role="tooltip"><span class="rg-tip-title">{escape(title)}</span>'
        f'<span class="rg-tip-text">{escape(text)}</span>{_url(segment.get("url"))}</span></span>'
    )


def answer_html(answer: dict[str, Any], segments: dict[str, dict[str, Any]]) -> str:
    """A ``/rag`` answer as cited sentences."""
    references: list[str] = answer.get("references", [])
    sentences = answer.get("answer", [])
    if not sentences:
        return '<div class="rg-pane rg-answer"><p class="rg-empty">(an empty answer)</p></div>'
    parts = []
    for sentence in sentences:
        cites = "".join(
            citation(i + 1, references[i], segments.get(references[i], {}))
            for i in sentence.get("citations", [])
            if 0 <= i < len(references)
        )
        parts.append(f"<p>{escape(sentence.get('text', ''))}{cites}</p>")
    return f'<div class="rg-pane rg-answer">{"".join(parts)}</div>'


def error_html(message: str) -> str:
    return (
        f'<div class="rg-pane rg-error" role="alert"><strong>This pipeline failed.</strong> '
        f"{escape(message)}<br>This battle cannot be voted on; start a new round.</div>"
    )


def waiting_html() -> str:
    """A running pipeline's pane before its first text. It shows no seconds: before the vote no timing may tell
    the sides apart (the battle's elapsed seconds are in the status line, the same for both)."""
    return (
        '<div class="rg-pane rg-wait" role="status"><span class="rg-spinner" aria-hidden="true"></span>'
        "Waiting for this answer…</div>"
    )


def timing_text(first_token_s: float | None, elapsed_s: float) -> str:
    """``first token 0.4 s · 2.1 s``: the seconds to the answer's first text and to its end."""
    first = f"first token {first_token_s:.1f} s · " if first_token_s is not None else ""
    return f"{first}{elapsed_s:.1f} s"


def timing_html(first_token_s: float | None, elapsed_s: float) -> str:
    """:func:`timing_text` as the line under a finished answer (only where its pipeline is named)."""
    return f'<p class="rg-timing">{timing_text(first_token_s, elapsed_s)}</p>'


def streaming_html(text: str) -> str:
    """A pane while its answer is being written: the text so far (as the model writes it, citations still
    raw) and a caret; no timing (see :func:`waiting_html`)."""
    return (
        f'<div class="rg-pane rg-streaming" aria-busy="true"><p class="rg-stream-text">{escape(text)}'
        f'<span class="rg-caret" aria-hidden="true"></span></p></div>'
    )


def placeholder_html(text: str = "The answer will appear here.") -> str:
    return f'<div class="rg-pane"><p class="rg-empty">{escape(text)}</p></div>'


VERDICTS = {
    "a": "You preferred A.",
    "b": "You preferred B.",
    "tie": "You called it a tie.",
    "bothbad": "You found both bad.",
}


def reveal_html(
    a: PipelineId,
    b: PipelineId,
    winner: str | None,
    note: str = "",
    failed: bool = False,
    timings: tuple[str, str] = ("", ""),
    notes: tuple[str, ...] = (),
) -> str:
    """The pipelines behind A and B after the vote (``failed``: after a battle that failed, in the error box's
    colours rather than the success box's), with each side's timing (:func:`timing_text`, shown only now) and
    any further ``notes`` (a pipeline that missed the time budget)."""

    def row(side: str, p: PipelineId, timing: str) -> str:
        took = f" — {escape(timing)}" if timing else ""
        return (
            f"<li><strong>{side}</strong>: <code>{escape(p.spec)}</code> (retriever {escape(p.retriever)}, "
            f"reranker {escape(p.reranker)}, generator {escape(p.generator)})"
            f'<span class="rg-reveal-timing">{took}</span></li>'
        )

    verdict = VERDICTS.get(winner or "", "") if winner else ""
    head = escape(" ".join(x for x in (verdict, note) if x))
    more = "".join(f'<p class="rg-note">{escape(n)}</p>' for n in notes)
    return (
        f'<div class="rg-reveal{" rg-reveal-failed" if failed else ""}"><p>{head}</p>'
        f'<ul class="rg-reveal-list">{row("A", a, timings[0])}{row("B", b, timings[1])}</ul>{more}'
        f"</div>"
    )


def message_html(text: str, kind: str = "info") -> str:
    cls = "rg-error" if kind == "error" else "rg-empty"
    return f'<div class="{cls}">{escape(text)}</div>'


def counter_html(before: str, seconds: float, after: str) -> str:
    """A status line with a count of seconds in it (``rg-secs``: the page shows them from the visitor's click,
    :mod:`webui.page`)."""
    return f'<div class="rg-empty">{escape(before)}<span class="rg-secs">{seconds:.0f}</span>{escape(after)}</div>'
