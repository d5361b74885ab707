"""What the arena's page does in the browser, without a round trip: the battle clock and the scroll cues.

The clock: a click on Battle (or Compare) starts it in the browser at once, before the battle reaches the
server (it may first wait in Gradio's queue); the status line counts from that click, and every
``rg-secs`` number the server's progress views send is shown as the seconds since that click.
:func:`clocked` wires it; Gradio's own progress (its queue and its ETA from past battles) is hidden.

The scroll cues: a table wider than its board (a phone) gets a fade at its right edge while there is more
to its right, and a "scroll sideways" line under it.
"""

from __future__ import annotations

import json
from typing import Any

from webui import render

CSS = """
/* Gradio leaves a hidden progress's text (its ETA from past battles) in the page at opacity 0, where screen
   readers still read it: hidden from them too */
[data-testid="status-tracker"].hide { visibility: hidden; }
.rg-scroll-wrap { position: relative; }
.rg-scroll-hint { display: none; margin: .2em 0 .4em 0; color: #4b5563; font-size: .85em; text-align: right; }
.rg-scroll-wrap.rg-overflows > .rg-scroll-hint { display: block; }
.rg-scroll-wrap.rg-overflows:not(.rg-at-end)::after { content: ""; position: absolute; top: 0; right: 0;
  bottom: 1.8em; width: 2.5em; pointer-events: none;
  background: linear-gradient(to right, rgba(107, 114, 128, 0), rgba(107, 114, 128, .45)); }
@media (max-width: 640px) {
  .rg-board th, .rg-board td { padding: .2em .3em; }
  .rg-board .rg-table th { white-space: normal; }
}
"""

#: The page's clock and scroll cues (see the module docstring); inserted in the page's ``<head>``.
HEAD = """<script>
(() => {
  if (window.__rgClock) return;
  const clock = window.__rgClock = { t0: {}, busy: {} };
  const tick = () => {
    for (const [id, t0] of Object.entries(clock.t0)) {
      const secs = String(Math.max(0, Math.floor((Date.now() - t0) / 1000)));
      document.querySelectorAll(`#${id} .rg-secs`).forEach((s) => {
        if (s.textContent !== secs) s.textContent = secs;
      });
    }
  };
  const cue = (box) => {
    const wrap = box.parentElement;
    const more = box.scrollWidth - box.clientWidth > 1;
    wrap.classList.toggle("rg-overflows", more);
    wrap.classList.toggle("rg-at-end", !more || box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
  };
  const seen = new WeakSet();
  const resized = new ResizeObserver((entries) => entries.forEach((e) => cue(e.target)));
  const scan = () => {
    tick();
    document.querySelectorAll(".rg-scroll-wrap > .rg-scroll").forEach((box) => {
      if (!seen.has(box)) {
        seen.add(box);
        resized.observe(box);
        box.addEventListener("scroll", () => cue(box), { passive: true });
      }
      cue(box);
    });
  };
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; scan(); });
  }).observe(document.documentElement, { childList: true, subtree: true, characterData: true });
  setInterval(tick, 250);
})();
</script>"""

START = "Starting the battle"
DONE = "Voting opens when both answers are in."


def clock_html(text: str = START) -> str:
    """The status line the click shows at once (the browser counts its ``rg-secs`` from the click)."""
    return render.counter_html(f"{text}: ", 0, f" s so far. {DONE}")


def _start_js(status_id: str, outputs: int) -> str:
    """Start the clock (unless this page's battle is still running) and show the wait in the panes, closed
    votes and no "again" button; ``outputs``: the panes, the status, the votes and that button."""
    values = [render.waiting_html(), render.waiting_html(), clock_html()]
    closed = {"__type__": "update", "interactive": False}
    hidden = {"__type__": "update", "visible": False}
    shown = [*values, *[closed] * (outputs - 4), hidden]
    return (
        f"() => {{ const c = window.__rgClock, id = {json.dumps(status_id)}; if (!c || c.busy[id]) return []; "
        f"c.busy[id] = true; c.t0[id] = Date.now(); return {json.dumps(shown)}; }}"
    )


def _over_js(status_id: str, failed: bool) -> str:
    message = render.message_html("The battle stopped: try again.", "error")
    value = json.dumps([message] if failed else [])
    return f"() => {{ const c = window.__rgClock; if (c) c.busy[{json.dumps(status_id)}] = false; return {value}; }}"


def clocked(trigger: Any, name: str, fn: Any, args: dict[str, Any], **more: Any) -> None:
    """``trigger`` (``go.click``, say) runs ``fn`` with ``args`` as the endpoint ``name``, Gradio's progress
    hidden, after the browser starts the clock (:func:`_start_js`); the clock's run ends with ``fn``'s.
    ``args["outputs"]`` are a battle's: its id, panes A and B, the JSON, the status, the votes, "again"."""
    outputs = args["outputs"]
    shown, status = [*outputs[1:3], *outputs[4:]], outputs[4]
    status_id = status.elem_id
    trigger(
        None, outputs=shown, js=_start_js(status_id, len(shown)), api_name=f"{name}_clock", api_visibility="private"
    )
    event = trigger(fn, **args, show_progress="hidden", api_name=name, **more)
    event.then(None, js=_over_js(status_id, False), api_name=f"{name}_over", api_visibility="private")
    js = _over_js(status_id, True)
    event.failure(None, outputs=[status], js=js, api_name=f"{name}_failed", api_visibility="private")
