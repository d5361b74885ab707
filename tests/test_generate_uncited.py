"""An answer that cites no context (the embedded SmolLM2 asked about what its contexts do not hold
writes fluent uncited inventions) says the contexts do not hold the answer, citing nothing, with
``uncited="no_answer"`` (the smollm2 default); the stream's sentences and ``done`` agree with the answer
without streaming. Checked on the rules with given model text, then with the real SmolLM2 in process on TREC
RAG 2024 topics over the demo index (the Python documentation: off-topic for almost all of them)."""

from __future__ import annotations

import asyncio

import pytest
from test_generate_backends import CANDIDATES, TOPIC  # three Python documentation segments

from ragnarok.core.settings import Settings
from ragnarok.core.types import Query
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.cite import NO_ANSWER_TEXT
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator
from ragnarok.stages.generate.llm import UNCITED_FALLBACK, finish
from ragnarok.stages.generate.prompts import get_template
from ragnarok.stages.generate.streaming import SentenceAssembler

INVENTED = "Paris is the capital of France. It lies on the river Seine. Millions visit it every year."
CITED = INVENTED + " The argparse module makes it easy to write command-line interfaces [1]."


def config(uncited: str) -> GeneratorConfig:
    return GeneratorConfig(name="g", backend="openai", attribution="check", uncited=uncited)  # type: ignore[arg-type]


def streamed(text: str, cfg: GeneratorConfig) -> tuple[list[tuple[str, list[int]]], object]:
    """The sentences a stream of ``text`` (a word at a time) sends, and its ``done`` answer."""
    assembler = SentenceAssembler.for_llm(TOPIC, CANDIDATES, 80, cfg, {})
    sent = []
    for word in text.split(" "):
        sent += [(e.data["text"], e.data["citations"]) for e in assembler.feed(word + " ") if e.event == "sentence"]
    events, answer = assembler.close()
    sent += [(e.data["text"], e.data["citations"]) for e in events if e.event == "sentence"]
    return sent, answer


def test_an_answer_that_cites_nothing_says_the_contexts_lack_it():
    kept = finish(INVENTED, TOPIC, CANDIDATES, 80, config("keep"))
    assert kept.references == [] and len(kept.answer) == 3  # the invention, as it was before
    said = finish(INVENTED, TOPIC, CANDIDATES, 80, config("no_answer"))
    assert [(s.text, s.citations) for s in said.answer] == [(NO_ANSWER_TEXT, [])] and said.references == []
    assert said.notes["fallback"] == UNCITED_FALLBACK
    one = finish(CITED, TOPIC, CANDIDATES, 80, config("no_answer"))  # one citing sentence: the answer stands
    assert one.references == [CANDIDATES[0].docid] and len(one.answer) == 4 and "fallback" not in one.notes
    for text in (INVENTED, CITED):  # streamed: the same sentences as the answer without streaming
        sent, done = streamed(text, config("no_answer"))
        assert sent == [(s.text, s.citations) for s in done.answer]
        assert done.model_dump() == finish(text, TOPIC, CANDIDATES, 80, config("no_answer")).model_dump()


@pytest.fixture(scope="module")
def smollm2():
    cfg = Settings().generator_configs()["smollm2"].model_copy(update={"timeout_s": 900})  # a busy machine
    assert cfg.uncited == "no_answer"
    gen = LlamaCppGenerator(cfg)
    assert gen.availability() is None
    return gen


def test_smollm2_on_rag24_topics_over_the_demo_index_cites_or_says_the_sources_lack_it(
    smollm2, demo_settings, shared_data
):
    from ragnarok.core.spec import parse
    from ragnarok.core.topics import read_topics
    from ragnarok.service.batch import local_services
    from ragnarok.service.gateway import PipelineRunner

    topics = read_topics(shared_data / "trec-rag" / "topics.rag24.test.txt")[::60]  # 6 of the 301
    runner = PipelineRunner(local_services(demo_settings)[0])

    async def rankings() -> list:
        return [(await runner.run(parse("bm25@20"), Query(text=t.text, qid=t.qid))).ranking for t in topics]

    template = get_template(smollm2.config.template or "small")
    fallbacks = 0
    for topic, ranking in zip(topics, asyncio.run(rankings())):
        if not ranking.candidates:  # BM25 found no word of it: the service answers so without the model
            continue
        answer = smollm2.generate(Query(text=topic.text, qid=topic.qid), ranking.candidates, template)
        if answer.references:  # some sentence cites a context that supports it
            assert any(s.citations for s in answer.answer)
        else:  # none does: no invention, the answer says the contexts lack it
            assert [(s.text, s.citations) for s in answer.answer] == [(NO_ANSWER_TEXT, [])], answer
            assert answer.notes["fallback"] == UNCITED_FALLBACK
            fallbacks += 1
    assert fallbacks >= 2  # off-topic contexts: answers say so (28 of 30 were uncited inventions before)
