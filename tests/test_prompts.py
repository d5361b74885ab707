"""Prompt templates are data: load, render, sanitise brackets, truncate, extend with a new file."""

import pytest

from ragnarok.generate.prompts import approx_tokens, build_messages, get_template, load_templates
from ragnarok.registry import UnknownComponentError
from ragnarok.types import Candidate, Doc

CANDS = [Candidate(docid=f"d{i}", score=1.0, doc=Doc(title=f"T{i}", segment=f"Segment {i} says [3] things. " * 40))
         for i in range(1, 6)]


@pytest.mark.parametrize("name", ["chatqa", "ragnarok", "biogen", "report"])
def test_every_packaged_template_renders(name):
    template = get_template(name)
    messages = build_messages(template, "what is gzip?", CANDS, max_prompt_tokens=100_000)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "what is gzip?" in user and "[1] T1: Segment 1 says (3) things." in user and "[5] T5:" in user
    assert "says [3]" not in user and "says (3)" in user  # brackets in segments cannot pose as citations


def test_chatqa_is_the_papers_prompt():
    t = get_template("chatqa")
    assert t.system.startswith("This is a chat between a user and an artificial intelligence assistant.")
    user = build_messages(t, "q", CANDS[:1])[1]["content"]
    assert user.count("Cite each context document that supports your answer within brackets [] using the IEEE "
                      "format.") == 2  # the instruction is repeated after the contexts


def test_truncation_keeps_every_context_within_budget():
    messages = build_messages(get_template("ragnarok"), "q", CANDS, max_prompt_tokens=600)
    total = sum(approx_tokens(m["content"]) for m in messages)
    assert total <= 600
    user = messages[1]["content"]
    assert all(f"[{i}] T{i}:" in user for i in range(1, 6)) and "…" in user


def test_unknown_template_lists_the_available_ones():
    with pytest.raises(UnknownComponentError, match="unknown prompt template 'haiku'; available: biogen, chatqa"):
        get_template("haiku")


def test_a_new_yaml_file_is_a_new_template(tmp_path):
    (tmp_path / "brief.yaml").write_text("name: brief\nsystem: Be brief.\nuser: '{topic} {contexts}'\nmax_words: 50\n")
    assert load_templates(tmp_path)["brief"].max_words == 50
    assert "chatqa" in load_templates(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="bad.yaml"):
        load_templates(broken)
    (broken / "bad.yaml").write_text("name: incomplete\n")
    with pytest.raises(ValueError, match="bad.yaml"):
        load_templates(broken)
