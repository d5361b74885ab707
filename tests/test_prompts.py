"""Prompt templates are data: load, render, sanitise brackets, truncate, extend with a new file."""

import re

import pytest

from ragnarok.core.registry import UnknownComponentError
from ragnarok.core.types import Candidate, Doc
from ragnarok.stages.generate.prompts import PACKAGED, approx_tokens, build_messages, get_template, load_templates

SEGMENT = "Segment {} says [3] things. "
CANDS = [
    Candidate(docid=f"d{i}", score=1.0, doc=Doc(title=f"T{i}", segment=SEGMENT.format(i) * 40)) for i in range(1, 6)
]
PACKAGED_NAMES = sorted(p.stem for p in PACKAGED.glob("*.yaml"))


def size(messages, count=approx_tokens):
    return sum(count(m["content"]) for m in messages)


def test_the_packaged_templates():
    assert {"chatqa", "ragnarok", "biogen", "report"} <= set(PACKAGED_NAMES)
    assert sorted(load_templates()) == PACKAGED_NAMES


@pytest.mark.parametrize("name", PACKAGED_NAMES)
def test_every_packaged_template_loads_and_renders(name):
    template = get_template(name)
    assert template.name == name and template.description and template.max_words > 0
    messages = build_messages(template, "what is gzip?", CANDS, max_prompt_tokens=100_000)
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == template.system
    user = messages[1]["content"]
    assert "what is gzip?" in user and "{" not in user
    assert re.findall(r"^\[(\d+)\] (T\d+): Segment \1 says \(3\) things\.", user, re.M) == [
        (str(i), f"T{i}") for i in range(1, 6)
    ]  # numbered from 1, in order, with titles
    assert "says [3]" not in user  # brackets in segments cannot pose as citations
    if "{max_words}" in template.user:
        assert str(template.max_words) in user


def test_chatqa_is_the_papers_prompt():
    t = get_template("chatqa")
    assert t.system == (
        "This is a chat between a user and an artificial intelligence assistant. The assistant gives "
        "helpful, detailed, and polite answers to the user's question based on the context. The assistant "
        "should also indicate when the answer cannot be found in the context."
    )
    user = build_messages(t, "how old is gzip", CANDS[:2])[1]["content"]
    instruction = (
        "INSTRUCTION: Please give a complete answer to the question. Cite each context document "
        "that supports your answer within brackets [] using the IEEE format."
    )
    assert user.startswith(instruction) and user.endswith(instruction)  # repeated after the contexts
    assert user.index("QUESTION: how old is gzip") < user.index("[1] T1: ") < user.index("[2] T2: ")


def test_brackets_in_titles_and_contexts_without_titles():
    cands = [
        Candidate(docid="a", score=1, doc=Doc(title="List [1]", segment="See 【2】 and [3-4].")),
        Candidate(docid="b", score=1, doc=Doc(segment="No title\nhere.")),
    ]
    user = build_messages(get_template("chatqa"), "q", cands)[1]["content"]
    assert "[1] List (1): See (2) and (3-4).\n[2] No title here." in user


def test_truncation_keeps_every_context_within_budget():
    for budget in (600, 900, 1500):
        messages = build_messages(get_template("ragnarok"), "q", CANDS, max_prompt_tokens=budget)
        assert budget - 60 < size(messages) <= budget  # within the budget and using most of it
        user = messages[1]["content"]
        lines = [line for line in user.split("\n") if re.match(r"\[\d\] T\d: ", line)]
        assert [line[:6] for line in lines] == [f"[{i}] T{i}" for i in range(1, 6)]
        assert all(line.endswith(" …") for line in lines)  # cut at a word boundary, marked
        assert max(map(len, lines)) - min(map(len, lines)) < 40  # shortened evenly


def test_truncation_shares_what_short_segments_leave():
    cands = [Candidate(docid="s", score=1, doc=Doc(title="S", segment="Short one.")), *CANDS[:2]]
    user = build_messages(get_template("ragnarok"), "q", cands, max_prompt_tokens=700)[1]["content"]
    assert "[1] S: Short one.\n" in user and user.count(" …") == 2


def test_truncation_with_a_real_style_tokenizer_and_an_impossible_budget():
    def words(text):
        return len(text.split())

    messages = build_messages(get_template("report"), "q", CANDS, max_prompt_tokens=400, count_tokens=words)
    assert size(messages, words) <= 400 and "[5] T5: Segment 5" in messages[1]["content"]
    tiny = build_messages(get_template("report"), "q", CANDS, max_prompt_tokens=10)
    assert "[1] T1:\n[2] T2:" in tiny[1]["content"] and "Segment" not in tiny[1]["content"]


def test_unknown_template_lists_the_available_ones():
    expected = "unknown prompt template 'haiku'; available: biogen, chatqa"
    with pytest.raises(UnknownComponentError, match=expected) as err:
        get_template("haiku")
    assert err.value.available == PACKAGED_NAMES


def test_a_new_yaml_file_is_a_new_template(tmp_path):
    (tmp_path / "brief.yaml").write_text(
        "system: Be brief.\nuser: '{topic}: {contexts} in {max_words} words'"
        "\nmax_words: 50\ncontext_format: '<{i}> {text}'\n"
    )
    templates = load_templates(tmp_path)
    assert templates["brief"].max_words == 50 and "chatqa" in templates  # the name defaults to the file stem
    messages = build_messages(get_template("brief", tmp_path), "q", CANDS[:1])
    user = messages[1]["content"]
    assert user.startswith("q: <1> Segment 1 says (3) things.") and user.endswith(" in 50 words")
    (tmp_path / "chatqa.yaml").write_text("name: chatqa\nsystem: Mine.\nuser: '{topic} {contexts}'\n")
    assert load_templates(tmp_path)["chatqa"].system == "Mine."  # a user template overrides a packaged one
    assert get_template("chatqa").system != "Mine."


@pytest.mark.parametrize(
    "content",
    [
        "name: [unclosed\n",  # not YAML
        "name: incomplete\n",  # missing system and user
        "- just\n- a list\n",  # not a mapping
        "system: s\nuser: '{topic} {contexts} {query}'\n",  # unknown placeholder
        "system: s\nuser: '{topic} only'\n",  # no {contexts}
        "system: s\nuser: '{topic} {contexts}'\ncontext_format: '{i} {body}'\n",
    ],
)
def test_a_malformed_template_names_its_file(tmp_path, content):
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(ValueError, match=r"bad\.yaml"):
        load_templates(tmp_path)
