"""The Gradio UI: tabs Blinded battle, Side-by-side, Leaderboards and JSON, over a :class:`webui.arena.Arena`.

``mount(app, settings)`` serves it inside the API at ``/arena`` (the client reaches the services through
``httpx.ASGITransport`` into that app); ``standalone_app(settings, rag_url)`` serves it alone against a
gateway's base URL (``python -m webui``). Gradio is imported when a UI is built, never at import time.
(No ``from __future__ import annotations`` here: Gradio finds a handler's ``gr.Request`` parameter by its
evaluated annotation.)
"""

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ragnarok.core.settings import Settings
from webui import page, render
from webui.arena import DEFAULT_TOPICS, Arena, BattleView, VoteView
from webui.client import RagClient
from webui.lazy import LazyUI, quiet_queue
from webui.warmup import after

if TYPE_CHECKING:
    import gradio as gr
    from fastapi import FastAPI

VOTES = (("a", "A is better"), ("b", "B is better"), ("tie", "Tie"), ("bothbad", "Both are bad"))
#: Each vote's endpoint for Gradio clients (the side-by-side tab's: ``side_`` before it).
VOTE_API_NAMES = {"a": "vote_a", "b": "vote_b", "tie": "tie", "bothbad": "bad"}
TITLE = "ragnarok arena"


def _session(request: Any) -> str:
    """The anonymous session id: Gradio's per-page session hash (the browser sends it: recorded, not
    trusted)."""
    return getattr(request, "session_hash", None) or "anonymous"


def rate_key(request: Any) -> str:
    """What the vote and battle rate limits count: the client's address as the server sees it — the TCP peer,
    or the ``X-Forwarded-For`` address when the peer is one of ``RAGNAROK_TRUSTED_PROXIES`` (rewritten before
    the arena sees the request) — never the session hash, which a client can rotate at will."""
    client = getattr(request, "client", None)
    return f"client:{getattr(client, 'host', None) or 'unknown'}"


def vote_from(arena: Arena, battle_id: str | None, winner: str, request: Any) -> VoteView:
    """A vote from a browser request: recorded under its session, rate-limited per client address."""
    return arena.vote(battle_id, winner, _session(request), rate_key(request))


def _theme() -> Any:
    import gradio as gr  # noqa: PLC0415

    # system fonts only: the default theme fetches Google Fonts, which an offline deployment cannot reach
    return gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])


def build(arena: Arena) -> "gr.Blocks":
    import gradio as gr  # noqa: PLC0415

    def answer_panes(prefix: str) -> tuple[gr.HTML, gr.HTML]:
        """Answer A and Answer B side by side."""
        panes = []
        with gr.Row(equal_height=False, elem_classes=["rg-panes"]):
            for side in ("a", "b"):
                with gr.Column():
                    gr.Markdown(f"### Answer {side.upper()}")
                    panes.append(gr.HTML(render.placeholder_html(), elem_id=f"{prefix}-pane-{side}"))
        return panes[0], panes[1]

    def vote_buttons(prefix: str) -> list[gr.Button]:
        with gr.Row():
            return [gr.Button(label, interactive=False, elem_id=f"{prefix}-vote-{key}") for key, label in VOTES]

    def battle_outputs(view: BattleView, votes: int = 4) -> list[Any]:
        """A view's outputs; a progress view leaves an unchanged pane and the JSON as they are, and keeps the
        votes closed (a pane being written shows its text so far, never a pipeline's name)."""
        return [
            view.battle_id,
            gr.skip() if view.pane_a is None else view.pane_a,
            gr.skip() if view.pane_b is None else view.pane_b,
            view.raw if view.done else gr.skip(),
            view.status,
            *[gr.Button(interactive=view.votable) for _ in range(votes)],
            gr.Button(visible=view.battle_id is not None and not view.votable),
        ]

    with gr.Blocks(title=TITLE, analytics_enabled=False) as blocks:
        gr.Markdown(f"# {TITLE}\nTwo RAG pipelines answer the same topic; you judge which answer is better.")
        with gr.Tabs():
            # ---- blinded battle ----
            with gr.Tab("Blinded battle", id="battle"):
                battle_id = gr.State(None)
                drawn = gr.State(None)
                with gr.Row(elem_classes=["rg-topic-row"]):
                    topic = gr.Textbox(
                        label="Topic",
                        placeholder="Ask something, e.g. how do I parse a CSV file",
                        scale=5,
                        elem_id="rg-topic",
                    )
                    draw = gr.Button("Random topic", scale=1, elem_id="rg-draw")
                    go = gr.Button("Battle", variant="primary", scale=1, elem_id="rg-go")
                pane_a, pane_b = answer_panes("rg")
                votes = vote_buttons("rg")
                status = gr.HTML("", elem_id="rg-status")
                new_round = gr.Button("New round", visible=False, elem_id="rg-new-round")

            # ---- side-by-side (unblinded) ----
            with gr.Tab("Side-by-side", id="side") as side_tab:
                side_id = gr.State(None)
                side_topic = gr.Textbox(label="Topic", elem_id="rg-side-topic")
                pickers: list[gr.Dropdown] = []
                with gr.Row():
                    for side in ("A", "B"):
                        with gr.Column():
                            gr.Markdown(f"### Pipeline {side}")
                            pickers += [
                                gr.Dropdown(
                                    label=f"{what} {side}",
                                    choices=[],
                                    allow_custom_value=False,
                                    elem_id=f"rg-side-{side.lower()}-{what.lower()}",
                                )
                                for what in ("Retriever", "Reranker", "LLM")
                            ]
                compare = gr.Button("Compare", variant="primary", elem_id="rg-compare")
                side_a, side_b = answer_panes("rg-side")
                side_votes = vote_buttons("rg-side")
                side_status = gr.HTML("", elem_id="rg-side-status")
                side_again = gr.Button("Compare again", visible=False)

            # ---- leaderboards ----
            with gr.Tab("Leaderboards", id="boards") as boards_tab:
                with gr.Row():
                    include = gr.Checkbox(
                        False, label="Include unblinded (side-by-side) votes", elem_id="rg-include-unblinded"
                    )
                    refresh = gr.Button("Refresh", elem_id="rg-refresh")
                summary = gr.HTML("", elem_id="rg-summary")
                board_panes = {}
                with gr.Tabs():
                    for name, label in (("rag", "RAG"), ("r", "R"), ("ag", "AG"), ("judges", "Judges")):
                        with gr.Tab(label, id=f"board-{name}"):
                            board_panes[name] = gr.HTML("", elem_id=f"rg-board-{name}")

            # ---- raw JSON ----
            with gr.Tab("JSON", id="json"):
                gr.Markdown("Both raw RAG answers of the latest battle, exactly as `POST /rag` returned them.")
                raw = gr.JSON(label="latest battle", elem_id="rg-json")

        # ---- handlers ----
        async def on_draw() -> tuple[Any, Any, str]:
            try:
                chosen = arena.random_topic()
            except (OSError, ValueError) as exc:
                return gr.Textbox(), None, render.message_html(str(exc), "error")
            return chosen.text, {"qid": chosen.qid, "text": chosen.text}, ""

        async def on_battle(text: str, drawn_topic: dict | None, request: gr.Request) -> AsyncIterator[list[Any]]:
            """Each pane shows its answer as it is written (webui.streaming); the votes open when both are
            done."""
            topic_id = drawn_topic["qid"] if drawn_topic and drawn_topic.get("text") == text else ""
            async for view in arena.battle_stream(text or "", topic_id, _session(request), rate_key=rate_key(request)):
                yield battle_outputs(view)

        def on_vote(winner: str):
            def handler(current: str | None, request: gr.Request) -> list[Any]:
                result = vote_from(arena, current, winner, request)
                keep = gr.Button(interactive=not result.voted)
                return [result.status, *[keep for _ in VOTES], gr.Button(visible=result.voted), result.raw or gr.JSON()]

            return handler

        def on_new_round() -> list[Any]:
            return [
                None,
                render.placeholder_html(),
                render.placeholder_html(),
                "",
                "",
                *[gr.Button(interactive=False) for _ in VOTES],
                gr.Button(visible=False),
            ]

        # every event has an API name, so Gradio clients see what each does (not /handler, /handler_1, ...)
        draw.click(on_draw, outputs=[topic, drawn, status], api_name="draw")
        battle_out = [battle_id, pane_a, pane_b, raw, status, *votes, new_round]
        battle_args: dict[str, Any] = {"inputs": [topic, drawn], "outputs": battle_out, "concurrency_limit": None}
        page.clocked(go.click, "battle", on_battle, battle_args)  # the click's clock first (webui.page)
        # Enter in the topic box: the same as /battle, left off the API page
        page.clocked(topic.submit, "battle_on_enter", on_battle, battle_args, api_visibility="undocumented")
        vote_out = [status, *votes, new_round, raw]
        for (key, label), button in zip(VOTES, votes):
            about = f"The vote '{label}' on this session's latest blinded battle."
            button.click(on_vote(key), [battle_id], vote_out, api_name=VOTE_API_NAMES[key], api_description=about)
        new_round.click(
            on_new_round, outputs=[battle_id, pane_a, pane_b, topic, status, *votes, new_round], api_name="new_round"
        )

        async def on_choices(*current: str) -> list[Any]:
            """Fill the dropdowns when the tab opens (so a blinded-only session never receives the pool)."""
            try:
                retrievers, rerankers, generators = await arena.side_choices()
            except Exception:  # noqa: BLE001 - the services are not up yet; Compare reports the cause
                return [gr.Dropdown() for _ in pickers]
            # defaults: B differs from A in its retriever when the pool has two, else in its generator
            b_retriever, b_generator = (1, 0) if len(retrievers) > 1 else (0, 1)
            defaults = ((0, 0, 0), (b_retriever, 0, b_generator))
            out = []
            for side in (0, 1):
                for slot, choices in enumerate((retrievers, rerankers, generators)):
                    default = defaults[side][slot]
                    value = current[3 * side + slot]
                    chosen = value if value in choices else choices[min(default, len(choices) - 1)]
                    out.append(gr.Dropdown(choices=choices, value=chosen))
            return out

        async def on_compare(
            text: str, ra: str, rr_a: str, ga: str, rb: str, rr_b: str, gb: str, request: gr.Request
        ) -> AsyncIterator[list[Any]]:
            try:
                a, b = arena.compose(ra, rr_a, ga), arena.compose(rb, rr_b, gb)
            except (ValueError, TypeError) as exc:
                yield battle_outputs(_bad(f"Choose a retriever, a reranker and an LLM for both sides ({exc})."))
                return
            async for view in arena.compare_stream(a, b, text or "", "", _session(request), rate_key=rate_key(request)):
                yield battle_outputs(view)

        def on_side_vote(winner: str):
            def handler(current: str | None, request: gr.Request) -> list[Any]:
                result = vote_from(arena, current, winner, request)
                return [
                    result.status,
                    *[gr.Button(interactive=not result.voted) for _ in VOTES],
                    gr.Button(visible=result.voted),
                ]

            return handler

        side_tab.select(on_choices, inputs=pickers, outputs=pickers, api_name="side_choices")
        side_out = [side_id, side_a, side_b, raw, side_status, *side_votes, side_again]
        compare_args: dict[str, Any] = {
            "inputs": [side_topic, *pickers],
            "outputs": side_out,
            "concurrency_limit": None,
        }
        page.clocked(compare.click, "compare", on_compare, compare_args)
        # "Compare again": the same as /compare, left off the API page
        page.clocked(side_again.click, "compare_again", on_compare, compare_args, api_visibility="undocumented")
        side_vote_out = [side_status, *side_votes, side_again]
        for (key, label), button in zip(VOTES, side_votes):
            about = f"The vote '{label}' on this session's latest side-by-side comparison."
            name = f"side_{VOTE_API_NAMES[key]}"
            button.click(on_side_vote(key), [side_id], side_vote_out, api_name=name, api_description=about)

        def on_boards(with_unblinded: bool) -> list[str]:
            text, panes = arena.leaderboards(bool(with_unblinded))
            return [text, *(panes[name] for name in board_panes)]

        board_out = [summary, *board_panes.values()]
        # one event for the three triggers, run one at a time and only for the latest trigger: a slow
        # recomputation can never overwrite a newer one (say, after the checkbox flips)
        gr.on(
            [boards_tab.select, refresh.click, include.change],
            on_boards,
            inputs=[include],
            outputs=board_out,
            concurrency_limit=1,
            trigger_mode="always_last",
            api_name="leaderboards",
        )
    blocks.queue(default_concurrency_limit=8)
    quiet_queue(blocks)  # webui.lazy: Gradio's queue polls every 1 ms otherwise
    return blocks


def _bad(message: str) -> BattleView:
    return BattleView(
        None, render.placeholder_html(), render.placeholder_html(), {}, False, render.message_html(message, "error")
    )


_BUILD_LOCK = threading.Lock()  # Gradio's Blocks context is process-global: build one UI at a time


def _mount(app: "FastAPI", arena: Arena, path: str) -> "FastAPI":
    import gradio as gr  # noqa: PLC0415

    with _BUILD_LOCK:
        blocks = build(arena)
    return gr.mount_gradio_app(
        app,
        blocks,
        path=path,
        css=render.CSS + page.CSS,
        head=render.HEAD + page.HEAD,
        theme=_theme(),
        ssr_mode=False,
        footer_links=[],
        show_error=True,
    )


def mount(app: "FastAPI", settings: Settings, path: str = "/arena", topics_path: Path | None = DEFAULT_TOPICS) -> Arena:
    """Serve the arena inside ``app`` at ``path`` (built on its first request); it calls the app's own REST
    API in process through ``httpx.ASGITransport``."""
    from fastapi import FastAPI  # noqa: PLC0415

    client = RagClient(
        "http://ragnarok.local", transport=httpx.ASGITransport(app=app), timeout_s=settings.gateway_timeout_s
    )
    arena = Arena(settings, client, topics_path)
    ui = LazyUI(lambda: _mount(FastAPI(), arena, "/"))
    app.mount(path, ui)
    app.state.arena_ui = ui  # `ragnarok serve` sets build_at_start
    app.state.arena = arena  # GET /v1/arena/pool reads its pool's state
    # Gradio's page links /manifest.json from the site root, outside this mount, and browsers ask the root for
    # /favicon.ico: answer both here so the page's console stays clean
    manifest = {
        "name": TITLE,
        "start_url": f"{path}/",
        "display": "standalone",
        "icons": [{"src": f"{path}/static/img/logo_nosize.svg", "sizes": "any", "type": "image/svg+xml"}],
    }

    async def manifest_json(request: Any) -> Any:
        from starlette.responses import JSONResponse  # noqa: PLC0415

        return JSONResponse(manifest, media_type="application/manifest+json")

    async def favicon(request: Any) -> Any:
        from starlette.responses import RedirectResponse  # noqa: PLC0415

        return RedirectResponse(f"{path}/favicon.ico")

    app.add_route("/manifest.json", manifest_json, methods=["GET"], include_in_schema=False)
    app.add_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    outer = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(parent: Any) -> AsyncIterator[Any]:
        async with outer(parent) as state:
            building: asyncio.Future[Any] | None = None
            if ui.build_at_start:
                # the UI once the server is quiet (Gradio's import and the build: seconds of CPU; the first page
                # is then at once); the warm-up answers, which load the pool's models (seconds of CPU on every
                # core, hundreds of MB), only once someone opens the arena: each generator is still measured
                # before that visitor's first draw (webui.warmup), and a server only asked for retrieval does
                # no start-up work beyond this
                building = asyncio.ensure_future(ui.warm_when_quiet())
                building.add_done_callback(lambda t: t.cancelled() or t.exception())
                ui.on_first_visit = lambda: after(ui.warm, arena.start_warm_up)
            try:
                yield state
            finally:
                if building is not None:
                    building.cancel()
                await arena.warming.aclose()
                await ui.aclose()

    app.router.lifespan_context = lifespan
    app.state.arena = arena
    return arena


def standalone_app(settings: Settings, rag_url: str, topics_path: Path | None = DEFAULT_TOPICS) -> "FastAPI":
    """The arena alone at ``/``, talking to the gateway at ``rag_url`` over HTTP, with the key in the
    environment variable ``arena_api_key_env`` (``RAGNAROK_ARENA_KEY``) when set. As the API, it believes
    ``X-Forwarded-For`` only from ``trusted_proxies`` (serve it with uvicorn's own proxy headers off)."""
    import os  # noqa: PLC0415

    from fastapi import FastAPI  # noqa: PLC0415

    from ragnarok.runtime.proxies import ForwardedFor  # noqa: PLC0415
    from ragnarok.runtime.redact import register_env  # noqa: PLC0415

    app = FastAPI(title=TITLE)
    app.add_middleware(ForwardedFor, trusted_hosts=settings.trusted_proxy_list() or "")
    register_env(settings.arena_api_key_env)  # the key is masked in every message and log line

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "rag_url": rag_url}

    client = RagClient(
        rag_url.rstrip("/"),
        timeout_s=settings.gateway_timeout_s,
        api_key=os.environ.get(settings.arena_api_key_env) or None,
    )
    arena = Arena(settings, client, topics_path)
    app.state.arena = arena
    return _mount(app, arena, "/")
