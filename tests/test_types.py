import json

import pytest
from pydantic import ValidationError

from ragnarok.core.types import Candidate, CitedSentence, Doc, Query, RagAnswer, Request, word_count

RANK_LLM_REQUEST = (
    '{"query": {"text": "how do I parse arguments", "qid": 7}, "candidates": ['
    '{"docid": "msmarco_v2.1_doc_51_766815931#2_1606878413", "score": 12.5, '
    '"doc": {"segment": "argparse [1] parses", "title": "T", "url": "u", "headings": "H", '
    '"start_char": 3, "end_char": 22}}, '
    '{"docid": "d2", "score": 1.0, "doc": {"contents": "rank_llm style"}}]}'
)


def test_rank_llm_request_round_trips_byte_for_byte():
    request = Request.model_validate_json(RANK_LLM_REQUEST)
    assert request.to_json() == RANK_LLM_REQUEST
    assert request.query.qid == 7
    assert request.candidates[1].doc.model_extra == {"contents": "rank_llm style"}


def test_our_request_has_rank_llm_field_order():
    request = Request(
        query=Query(text="q", qid="1"),
        candidates=[
            Candidate(
                docid="a#0_0",
                score=1.0,
                doc=Doc(segment="s", title="t", url="u", headings="h", start_char=0, end_char=1),
            )
        ],
    )
    data = json.loads(request.to_json())
    assert list(data) == ["query", "candidates"]
    assert list(data["query"]) == ["text", "qid"]
    assert list(data["candidates"][0]) == ["docid", "score", "doc"]


def test_response_length_is_whitespace_word_count():
    answer = RagAnswer.build(
        "t1",
        "topic",
        ["a", "b"],
        [CitedSentence(text="Two  words.", citations=[0]), CitedSentence(text=" three\nmore words ", citations=[1, 0])],
    )
    assert answer.response_length == 5 == word_count("Two  words.") + word_count(" three\nmore words ")


def test_citations_must_point_into_references():
    with pytest.raises(ValidationError, match="outside references"):
        RagAnswer(topic_id="t", topic="x", references=["a"], answer=[CitedSentence(text="s", citations=[1])])
