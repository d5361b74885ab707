"""The embedded model has one owner thread: every call into its llama.cpp context is made there, whatever thread
or event loop asks, and a stream cancelled at any moment stops it without another thread touching the context.
Then a storm of streams cancelled at random beside plain answers and the arena's warm-up, against `ragnarok
serve`: the process stays up, every request is answered or cancelled, and the next answer is the same as before."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time

import httpx
import pytest
from servers import ragnarok_serve

from ragnarok.core.settings import Settings
from ragnarok.core.types import Candidate, Doc, Query
from ragnarok.stages.generate.base import GenerationError
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator
from ragnarok.stages.generate.prompts import get_template

TOPIC = Query(text="how do I compress a file with gzip", qid="t1")
CANDIDATES = [
    Candidate(docid=f"stdlib.gzip#{i}_0", score=1.0, doc=Doc(title="gzip", segment=text))
    for i, text in enumerate(
        [
            "gzip.open() opens a gzip-compressed file in binary or text mode.",
            "The compresslevel argument is an integer from 0 to 9 controlling compression.",
            "Use shutil.copyfileobj to copy a file into a gzip.open() file object.",
        ]
    )
]


@pytest.fixture
def recorded(monkeypatch):
    """llama_cpp.Llama whose context calls record the thread they are made on."""
    import llama_cpp

    threads: list[tuple[str, int]] = []

    class Recording(llama_cpp.Llama):
        def reset(self):
            threads.append(("reset", threading.get_ident()))
            return super().reset()

        def eval(self, tokens):
            threads.append(("eval", threading.get_ident()))
            return super().eval(tokens)

        def create_chat_completion(self, *args, **kwargs):
            threads.append(("create", threading.get_ident()))
            inner = super().create_chat_completion(*args, **kwargs)

            def chunks():
                try:
                    for chunk in inner:
                        threads.append(("next", threading.get_ident()))
                        yield chunk
                finally:
                    threads.append(("close", threading.get_ident()))
                    inner.close()

            return chunks()

    monkeypatch.setattr(llama_cpp, "Llama", Recording)
    return threads


def test_every_call_into_the_context_is_made_on_its_owner_thread(recorded):
    config = Settings().generator_configs()["smollm2"].model_copy(update={"timeout_s": 300, "slot_wait_s": 300})
    gen = LlamaCppGenerator(config)
    template = get_template(config.template or "small")
    first = gen.generate(TOPIC, CANDIDATES, template)

    async def cancelled_streams() -> None:
        for delay in (0.0, 0.05, 0.3, 0.8):
            stream = gen.astream(TOPIC, CANDIDATES, template)
            try:
                async with asyncio.timeout(delay + 0.01):
                    async for _ in stream:
                        pass
            except TimeoutError:
                pass
            finally:
                await stream.aclose()

    plain = threading.Thread(target=lambda: gen.generate(TOPIC, CANDIDATES, template))
    plain.start()
    asyncio.run(cancelled_streams())
    plain.join()
    again = gen.generate(TOPIC, CANDIDATES, template)
    owner = gen.owner._thread.ident
    assert recorded and {ident for _, ident in recorded} == {owner}, recorded
    assert [kind for kind, _ in recorded].count("create") == [kind for kind, _ in recorded].count("close")
    assert (again.answer, again.references) == (first.answer, first.references)  # whatever ran and was cut off


def test_the_prompt_prefix_stays_evaluated_and_answers_stay_the_same():
    """The system message and the instructions are evaluated once and kept; the same prompt gets the same answer
    whatever ran between (another topic, another template, a prompt of another kind) and on a fresh model."""
    config = Settings().generator_configs()["smollm2"].model_copy(update={"timeout_s": 300, "slot_wait_s": 300})
    gen = LlamaCppGenerator(config)
    small = get_template("small")
    first = gen.generate(TOPIC, CANDIDATES, small)
    prefix = gen.prefix.tokens
    assert gen.prefix.misses == 1 and len(prefix) > 50  # the system message and the instructions
    gen.generate(Query(text="what does compresslevel control", qid="t2"), CANDIDATES[1:], small)
    assert gen.prefix.hits == 1 and gen.prefix.tokens == prefix
    gen.complete([{"role": "system", "content": "You judge answers."}, {"role": "user", "content": "Say yes."}])
    gen.generate(TOPIC, CANDIDATES, get_template("ragnarok"))
    assert gen.prefix.misses == 3 and gen.prefix.tokens != prefix
    again = gen.generate(TOPIC, CANDIDATES, small)
    hit = gen.generate(TOPIC, CANDIDATES, small)
    assert gen.prefix.misses == 4 and gen.prefix.hits == 2
    fresh = LlamaCppGenerator(config).generate(TOPIC, CANDIDATES, small)
    assert first.answer == again.answer == hit.answer == fresh.answer


def test_a_deadline_stops_the_model_at_its_next_token():
    """The caller is answered at its deadline (plus the owner's grace); the owner stops at the first token after
    the prompt's evaluation (one call into llama.cpp, which runs to its end), then is free for the next job."""
    from ragnarok.stages.generate.llama_cpp import OWNER_GRACE_S

    gen = LlamaCppGenerator(
        Settings().generator_configs()["smollm2"].model_copy(update={"timeout_s": 0.3, "max_tokens": 400})
    )
    gen.load()
    start = time.monotonic()
    with pytest.raises(GenerationError) as info:
        gen.generate(TOPIC, CANDIDATES, get_template("ragnarok"))
    assert info.value.timeout and time.monotonic() - start < 0.3 + OWNER_GRACE_S + 1
    free = gen.owner.submit(lambda llm: "free")
    assert free.result(timeout=60) == "free"


@pytest.mark.slow
def test_a_storm_of_cancelled_streams_beside_answers_and_the_warm_up(demo_settings, tmp_path):
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}
    request = {
        "topic": TOPIC.text,
        "request": {"query": {"text": TOPIC.text}, "candidates": [c.model_dump() for c in CANDIDATES]},
        "generator": "smollm2",
    }
    with ragnarok_serve(env, output=tmp_path / "serve.log") as base:
        before = httpx.post(f"{base}/v1/generate", json=request, timeout=300).json()
        httpx.get(f"{base}/arena/", timeout=120)  # the first visit starts the arena's warm-up answers
        rng, statuses, lock = random.Random(0), [], threading.Lock()

        def client(n: int) -> None:
            for i in range(n):
                cut = rng.uniform(0.0, 1.5)  # the client hangs up this long after it asked, whatever it got
                start, outcome = time.monotonic(), "cancelled"
                try:
                    with (
                        httpx.Client(timeout=cut + 0.05) as http,
                        http.stream("POST", f"{base}/v1/generate", json={**request, "stream": True}) as response,
                    ):
                        for _ in response.iter_bytes():
                            if time.monotonic() - start > cut:
                                break
                        else:
                            outcome = response.status_code
                except httpx.TimeoutException:
                    pass
                with lock:
                    statuses.append(outcome)
                if i == 12:  # a plain /rag answer in the middle of each client's streams
                    plain = httpx.post(
                        f"{base}/rag", timeout=300, json={"topic": TOPIC.text, "pipeline": "bm25@5 | smollm2"}
                    )
                    with lock:
                        statuses.append(plain.status_code)

        threads = [threading.Thread(target=client, args=(25,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
        after = httpx.post(f"{base}/v1/generate", json=request, timeout=300).json()
    assert len([s for s in statuses if s != 200]) >= 100 and set(statuses) <= {200, 504, "cancelled"}, statuses
    assert after == before
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert "GGML_ASSERT" not in log and "generator already executing" not in log and "Traceback" not in log
