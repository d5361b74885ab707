"""The arena without a browser: pool pairing, rendering and escaping, and the UI's functions over the real API
(demo index, real Lucene, a real SQLite vote log), including blinding, the one vote and a failing pipeline."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from html.parser import HTMLParser

import httpx
import pytest
from servers import free_port

from api.main import create_app
from ragnarok.arena.pool import compose, default_specs, identify, make_pool, pair_key, pick_pair
from ragnarok.stages.generate.base import GeneratorConfig
from webui import boards, render
from webui.arena import Arena
from webui.client import RagClient

POOL = ["bm25@20 | extractive", "bm25+rocchio@20 | extractive", "bm25+rm3@20 | extractive"]
NAMES = ["bm25", "rocchio", "rm3", "extractive", "@20"]  # every pool pipeline's spec contains some of these
TOPIC = "compress a file with gzip"


# ---- pool and pairing (pure) ----


def test_identify_keys_a_pipeline_by_component():
    p = identify("rrf(bm25, bm25+rocchio)@50 | embedding@10 | smollm2:chatqa")
    assert (p.retriever, p.reranker, p.generator) == ("rrf(bm25, bm25+rocchio)@50", "embedding@10", "smollm2:chatqa")
    assert identify("bm25@20|extractive").as_dict() == {
        "spec": "bm25@20 | extractive",
        "retriever": "bm25@20",
        "reranker": "none",
        "generator": "extractive",
    }
    assert compose("bm25@20", "none", "extractive") == identify("bm25@20 | extractive")
    with pytest.raises(ValueError, match="no generator"):
        identify("bm25@20")
    with pytest.raises(ValueError, match="at least two"):
        make_pool(["bm25@20 | extractive", "bm25@20|extractive"])  # the same pipeline twice


def test_default_pool_is_the_product_of_available_components():
    specs = default_specs(["bm25", "dense:minilm"], ["extractive", "smollm2"], fuse=False)
    assert specs == [
        "bm25@20 | extractive",
        "bm25@20 | smollm2",
        "dense:minilm@20 | extractive",
        "dense:minilm@20 | smollm2",
    ]
    assert len(make_pool(specs)) == 4
    # with a dense index, its fusion with the best sparse retriever joins the pool (as the offline preset)
    fused = default_specs(["bm25", "bm25+rocchio", "dense:minilm"], ["extractive"])
    assert fused[-1] == "rrf(bm25+rocchio, dense:minilm)@20 | extractive" and len(fused) == 4
    assert default_specs(["bm25", "bm25+rocchio"], ["extractive"]) == [
        "bm25@20 | extractive",
        "bm25+rocchio@20 | extractive",
    ]  # no dense index yet: no fusion


def test_pairs_are_different_favour_fewer_votes_and_swap_sides():
    pool = make_pool(POOL)
    a, b, c = (p.spec for p in pool)
    votes = {pair_key(a, b): 200}  # (a, c) and (b, c) have none
    rng = random.Random(7)
    draws = [pick_pair(pool, votes, rng) for _ in range(3000)]
    assert all(x.spec != y.spec for x, y in draws)
    pairs = Counter(pair_key(x.spec, y.spec) for x, y in draws)
    assert pairs[pair_key(a, b)] < 0.02 * len(draws)  # weight 1/201 against 1 and 1
    assert pairs[pair_key(a, c)] > 0.4 * len(draws) and pairs[pair_key(b, c)] > 0.4 * len(draws)
    sides = Counter(x.spec for x, _ in draws if pair_key(x.spec, _.spec) == pair_key(a, c))
    assert 0.4 < sides[a] / (sides[a] + sides[c]) < 0.6  # random side swap
    with pytest.raises(ValueError, match="two different"):
        pick_pair(pool[:1], {}, rng)


# ---- rendering ----


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    return parser


EVIL_SEGMENT = {
    "title": "<b>Title</b><script>alert('t')</script>",
    "segment": "Body <script>alert(1)</script> & <img src=x onerror=alert(2)>",
    "url": "javascript:alert(3)",
}


def test_answer_html_escapes_corpus_and_model_text():
    answer = {
        "references": ["doc#1", "doc#2"],
        "answer": [
            {"text": "Try <img src=x onerror=alert(4)> now", "citations": [0, 1]},
            {"text": "</p><script>alert(5)</script>", "citations": []},
        ],
    }
    segments = {"doc#1": EVIL_SEGMENT, "doc#2": {"title": "Safe", "segment": "ok", "url": 'https://e.org/?a=1&b="2"'}}
    html = render.answer_html(answer, segments)
    parsed = _parse(html)
    assert {tag for tag, _ in parsed.tags} <= {"div", "p", "span", "a"}  # no script, no img, no b
    assert not any(name.startswith("on") for _, attrs in parsed.tags for name in attrs)
    text = "".join(parsed.text)
    for shown in (
        "<img src=x onerror=alert(4)>",
        "</p><script>alert(5)</script>",
        "<script>alert(1)</script>",
        "<b>Title</b>",
        "javascript:alert(3)",
    ):
        assert shown in text  # rendered as text
    links = [attrs["href"] for tag, attrs in parsed.tags if tag == "a"]
    assert links == ['https://e.org/?a=1&b="2"']  # only http(s) URLs become links; javascript: stays text
    cites = [attrs for tag, attrs in parsed.tags if tag == "span" and attrs.get("class") == "rg-cite"]
    assert len(cites) == 2 and all(c["tabindex"] == "0" for c in cites)
    assert "[1]" in text and "[2]" in text


def test_error_and_reveal_escape_too():
    assert "<script>" not in render.error_html("HTTP 502: <script>x</script>")
    pool = make_pool(POOL)
    reveal = render.reveal_html(pool[0], pool[1], "tie")
    assert POOL[0] in "".join(_parse(reveal).text) and "tie" in reveal


def test_boards_from_known_battles():
    a, b = identify(POOL[0]).as_dict(), identify(POOL[1]).as_dict()
    rows = [(a, b, "a")] * 6 + [(b, a, "b")] * 2 + [(a, b, "b")] * 2 + [(a, b, "tie")]
    computed = boards.compute(rows, rounds=20)
    rag = computed["rag"]
    assert rag.battles == 11 and [r.name for r in rag.rows] == [POOL[0], POOL[1]]
    assert [r.votes for r in rag.rows] == [11, 11]
    assert computed["r"].battles == 11 and computed["ag"].battles == 0  # same generator: an R battle
    html = boards.board_html(rag)
    assert boards.table_html(rag).count("<tr") == 3
    assert html.count("<circle") == 4 and "rg-intervals-narrow" in html  # the wide plot and the stacked one
    assert boards.heatmap_html(rag).count("<tr>") == 3
    assert rag.rates[POOL[0]][POOL[1]] == pytest.approx((8 + 0.5) / 11)
    assert "No votes" in boards.board_html(computed["ag"])


# ---- the UI's functions over the real API ----


@pytest.fixture
def api_settings(demo_settings, tmp_path):
    return demo_settings.model_copy(update={"arena_pool": POOL, "database_url": f"sqlite:///{tmp_path / 'votes.db'}"})


def _arena(settings) -> Arena:
    app = create_app(settings, arena=False)
    client = RagClient("http://ragnarok.test", transport=httpx.ASGITransport(app=app), timeout_s=60)
    return Arena(settings, client, rng=random.Random(1))


def _leaks(view_parts: list[str], names: list[str]) -> list[str]:
    blob = "\n".join(view_parts).lower()
    return [n for n in names if n.lower() in blob]


def test_blinded_battle_names_no_pipeline_until_the_vote(api_settings):
    arena = _arena(api_settings)
    view = asyncio.run(arena.battle(TOPIC, "demo-02", "session-1"))
    assert view.votable and view.battle_id and not view.revealed
    sent = [view.battle_id, view.pane_a, view.pane_b, view.status, json.dumps(view.raw)]
    assert _leaks(sent, NAMES) == []
    assert "rg-cite" in view.pane_a and "gzip" in view.pane_a and "gzip" in view.pane_b
    assert view.raw["A"]["references"] and view.raw["B"]["references"]
    for side in ("A", "B"):  # the JSON tab shows what POST /rag returned: the cited segments too
        assert set(view.raw[side]["segments"]) == set(view.raw[side]["references"])
        assert all(s.get("segment") for s in view.raw[side]["segments"].values())

    stored = arena.store.get(view.battle_id)  # the identities live server-side
    assert stored.mode == "blinded" and stored.topic_id == "demo-02"
    assert {stored.pipeline_a["spec"], stored.pipeline_b["spec"]} <= set(POOL)
    assert stored.pipeline_a["spec"] != stored.pipeline_b["spec"]

    voted = arena.vote(view.battle_id, "b", "session-1", "client:127.0.0.1")
    assert voted.voted and stored.pipeline_a["spec"] in voted.status and stored.pipeline_b["spec"] in voted.status
    again = arena.vote(view.battle_id, "a", "session-1", "client:127.0.0.1")  # a second click, or a replay
    assert not again.voted and "voted on already" in again.status
    assert arena.store.get(view.battle_id).winner == "b"
    assert not arena.vote("0" * 32, "a", "session-1", "client:127.0.0.1").voted
    assert "no battle" in arena.vote(None, "a", "session-1", "client:127.0.0.1").status

    summary, panes = arena.leaderboards()
    # one vote: both systems in the plain and the style-controlled table, provisional, no rank, no interval
    assert ">1<" in summary and panes["rag"].count("rg-votes") == 4
    assert panes["rag"].count('class="rg-provisional"') == 4 and "rg-intervals" not in panes["rag"]
    assert "Style-controlled" in panes["rag"] and "fewer than 10 votes" in panes["rag"]
    # an unchanged log is not fitted again (a refresh took seconds); a new vote is
    calls = []
    fit = boards.compute
    boards.compute = lambda *a, **k: calls.append(1) or fit(*a, **k)
    try:
        assert arena.leaderboards() == (summary, panes) and calls == []
        other = asyncio.run(arena.compare(identify(POOL[0]), identify(POOL[1]), TOPIC, "", "session-1"))
        assert arena.vote(other.battle_id, "a", "session-1", "client:127.0.0.1").voted
        assert arena.leaderboards(include_unblinded=True)[0] != summary and calls == [1]
    finally:
        boards.compute = fit


def test_side_by_side_votes_are_unblinded_and_excluded_by_default(api_settings):
    arena = _arena(api_settings)
    a, b = arena.compose("bm25@20", "none", "extractive"), arena.compose("bm25+rm3@20", "none", "extractive")
    view = asyncio.run(arena.compare(a, b, TOPIC, "", "s"))
    assert view.votable and view.revealed and view.raw["pipelines"]["A"]["spec"] == a.spec
    assert arena.vote(view.battle_id, "a", "s", "client:127.0.0.1").voted
    assert arena.store.get(view.battle_id).mode == "unblinded"
    assert ">0<" in arena.leaderboards(False)[0]
    assert ">1<" in arena.leaderboards(True)[0]
    same = asyncio.run(arena.compare(a, a, TOPIC, "", "s"))
    assert same.battle_id is None and "same pipeline" in same.status
    empty = asyncio.run(arena.battle("   ", "", "s"))
    assert empty.battle_id is None and not empty.votable and "Type a topic" in empty.status


def test_a_failing_pipeline_shows_its_error_and_the_battle_is_not_votable(api_settings):
    down = GeneratorConfig(
        name="down-llm",
        backend="openai",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="m",
        api_key_env=None,
        max_retries=0,
        timeout_s=5,
    )
    settings = api_settings.model_copy(
        update={"generators": [down], "arena_pool": ["bm25@20 | extractive", "bm25@20 | down-llm"]}
    )
    arena = _arena(settings)
    view = asyncio.run(arena.battle(TOPIC, "", "s"))
    assert view.battle_id and not view.votable
    panes = [view.pane_a, view.pane_b]
    failed = [p for p in panes if "rg-error" in p]
    assert len(failed) == 1 and "This pipeline failed" in failed[0] and "HTTP 5" in failed[0]
    assert any("rg-answer" in p for p in panes)
    assert "cannot be voted" in view.status
    assert "rg-reveal rg-reveal-failed" in view.status  # the error box's colours, not the success box's
    refused = arena.vote(view.battle_id, "a", "s", "client:127.0.0.1")
    assert not refused.voted and "not votable" in refused.status
    # the arena keeps running: a battle between working pipelines still works
    ok = asyncio.run(arena.compare(identify(POOL[0]), identify(POOL[1]), TOPIC, "", "s"))
    assert ok.votable and arena.vote(ok.battle_id, "tie", "s", "client:127.0.0.1").voted


def _browser_request(session_hash: str, host: str):
    """The ``gr.Request`` Gradio hands a handler: the HTTP request as the server received it (its peer
    address) and the session hash the browser chose."""
    import gradio as gr
    from starlette.requests import Request

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/gradio_api/queue/join",
        "headers": [],
        "query_string": b"",
        "client": (host, 40000),
        "server": ("127.0.0.1", 8000),
        "scheme": "http",
    }
    return gr.Request(request=Request(scope), session_hash=session_hash)


def test_rotating_the_session_does_not_bypass_the_vote_limit(tmp_path):
    """The UI's vote handlers rate-limit by client address: a fresh session hash per vote buys nothing."""
    from ragnarok.core.settings import Settings
    from webui.app import vote_from

    settings = Settings(
        data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'v.db'}", arena_votes_per_minute=2, arena_pool=POOL
    )
    arena = Arena(settings, client=None)  # type: ignore[arg-type] - voting calls no service
    a, b = identify(POOL[0]).as_dict(), identify(POOL[1]).as_dict()
    battles = [
        arena.store.create_battle("blinded", "", TOPIC, a, b, {"answer": []}, {"answer": []}, None, None, "s")
        for _ in range(4)
    ]
    votes = [vote_from(arena, battles[i], "a", _browser_request(f"fresh-session-{i}", "203.0.113.7")) for i in range(3)]
    assert [v.voted for v in votes] == [True, True, False]
    assert "too many votes" in votes[2].status
    assert vote_from(arena, battles[3], "tie", _browser_request("fresh-session-0", "203.0.113.8")).voted


def test_default_pool_comes_from_the_services(demo_settings, tmp_path):
    settings = demo_settings.model_copy(update={"arena_pool": [], "database_url": f"sqlite:///{tmp_path / 'v.db'}"})
    specs = {p.spec for p in asyncio.run(_arena(settings).pool())}
    assert set(POOL) <= specs  # every available retriever x generator, nothing to configure
    assert not any(s.endswith(("gpt-4o", "command-r-plus")) for s in specs)  # no keys, no hosted LLMs


def test_the_ui_builds_without_io_and_its_config_names_no_pipeline(api_settings):
    import gradio as gr

    from webui.app import build

    blocks = build(_arena(api_settings))
    assert isinstance(blocks, gr.Blocks)
    config = json.dumps(blocks.get_config_file(), default=str)
    for label in ("Blinded battle", "Side-by-side", "Leaderboards", "JSON", "A is better", "Both are bad"):
        assert label in config
    assert _leaks([config], NAMES) == []


def test_every_ui_event_has_an_api_name_that_says_what_it_does(tmp_path):
    """Gradio clients see each vote by name (not /handler, /handler_1, ...), and every other event too; Enter in
    the topic box and "Compare again" repeat /battle and /compare, callable but left off the API page."""
    from ragnarok.core.settings import Settings
    from webui.app import build

    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'v.db'}", arena_pool=POOL)
    blocks = build(Arena(settings, client=None))  # type: ignore[arg-type] - building calls no service
    votes = {"vote_a": "A is better", "vote_b": "B is better", "tie": "Tie", "bad": "Both are bad"}
    listed = blocks.get_api_info()["named_endpoints"]
    assert set(listed) == {
        f"/{name}"
        for name in [*votes, *(f"side_{v}" for v in votes), "draw", "battle", "new_round", "compare"]
        + ["side_choices", "leaderboards"]
    }
    for name, label in votes.items():
        assert f"'{label}'" in listed[f"/{name}"]["description"] and "blinded" in listed[f"/{name}"]["description"]
        assert f"'{label}'" in listed[f"/side_{name}"]["description"]
    events = {d["api_name"]: d for d in blocks.get_config_file()["dependencies"]}
    assert len(events) == len(blocks.get_config_file()["dependencies"])  # every event named, each once
    assert {n: events[n]["api_visibility"] for n in ("battle_on_enter", "compare_again")} == dict.fromkeys(
        ("battle_on_enter", "compare_again"), "undocumented"
    )


def test_standalone_arena_talks_to_a_gateway_over_http(api_settings):
    """``python -m webui``'s app: the same client over real HTTP to an API served by uvicorn."""
    from fastapi.testclient import TestClient
    from servers import serve_app

    from webui.app import standalone_app

    with serve_app(create_app(api_settings, arena=False)) as base:
        app = standalone_app(api_settings, base)
        with TestClient(app) as ui:
            assert ui.get("/healthz").json()["rag_url"] == base
            assert "ragnarok arena" in ui.get("/").text
        arena: Arena = app.state.arena
        drawn = arena.random_topic()
        assert drawn.qid.startswith("demo-") and drawn.text
        view = asyncio.run(arena.battle(drawn.text, drawn.qid, "s"))
        assert view.votable and _leaks([view.pane_a, view.pane_b, json.dumps(view.raw)], NAMES) == []
        assert arena.store.get(view.battle_id).topic_id == drawn.qid
    down = asyncio.run(arena.battle(TOPIC, "", "s"))  # the gateway is gone: both panes say so, nothing crashes
    assert not down.votable and down.pane_a.count("cannot reach") == 1 and "rg-error" in down.pane_b


def test_the_pages_root_requests_are_answered(api_settings):
    """Gradio's page asks the site root for /manifest.json (it used to 404 in the console) and browsers ask
    for /favicon.ico: the API that mounts the arena answers both, without building the UI."""
    from fastapi.testclient import TestClient

    with TestClient(create_app(api_settings)) as client:
        manifest = client.get("/manifest.json")
        assert manifest.status_code == 200 and manifest.json()["start_url"] == "/arena/"
        icon = client.get("/favicon.ico", follow_redirects=False)
        assert icon.status_code == 307 and icon.headers["location"] == "/arena/favicon.ico"


def test_the_heatmap_leaves_out_provisional_systems_as_the_table_does():
    a, b, c = (identify(spec).as_dict() for spec in POOL[:3])
    rows = [(a, b, "a")] * 6 + [(b, a, "b")] * 4 + [(c, a, "a")] * 3  # c: 3 votes, a perfect record
    rag = boards.compute(rows, rounds=20)["rag"]
    assert [r.provisional for r in rag.rows] == [False, False, True]
    heatmap = boards.heatmap_html(rag)
    assert heatmap.count("<tr>") == 3 and POOL[2] not in heatmap and "1 provisional system(s)" in heatmap
