"""Track submissions against the official TREC RAG checkers (items 20-25).

The oracle below restates, in our own words, the rules of castorini/ragnarok's checkers as read from their
source (nothing of theirs is copied or imported):

* 2024: ``src/ragnarok/scripts/check_trec_rag24_gen.py`` (commit aa86631; the same logic later moved to
  ``rag24_validation.py``, commit 7233fa7): every line needs run_id, topic_id, topic, references,
  response_length and answer; one run tag; known topic ids with the topic text verbatim; references match
  ``msmarco_v2.1_doc_\\d+_\\d+#\\d+_\\d+``, unique, at most 20; citations inside references; a topic answered
  at most once. Words: per sentence ``len(NFKC(text.strip()).split())``; an answer over 400 words loses whole
  sentences from the end and a wrong response_length is rewritten (both warnings, in ``.fixed``).
* 2025: ``src/ragnarok/scripts/validate_trec_rag25_gen.py`` (commit 04644ce): before checking it removes repeated
  references, keeps the first 100 and trims answers over 400 words (same count); then errors are: metadata not
  an object, a missing team_id / run_id / narrative_id, a narrative_id not in the topic file, a
  ``metadata.type`` other than ``manual`` or ``automatic``, references or answer not lists, a sentence without
  a string text or a list of integer citations inside references. A missing type, narrative or prompt and a
  reference not in MS MARCO V2.1 form are warnings.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import time
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings
from ragnarok.core.topics import read_jsonl, read_tsv
from ragnarok.core.types import CitedSentence, RagAnswer, word_count
from ragnarok.track.formats import answer_record
from ragnarok.track.output import JsonLinesLog
from ragnarok.track.run import TrackOptions, write_r_run
from ragnarok.track.validate import validate

ROOT = Path(__file__).resolve().parent.parent
MARCODOC = re.compile(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$")
SEGS = [f"msmarco_v2.1_doc_{i}_{i * 7}#{i % 3}_{i * 11}" for i in range(30)]
cli = CliRunner()


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Settings read again in each test (conftest gives each its own data directory)."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


# ------------------------------------------------------------------ the official checkers, restated


def official_words(text: str) -> int:
    return len(unicodedata.normalize("NFKC", text.strip()).split())


def official_2024(path: Path, topics: dict[str, str]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the 2024 checker on ``path``."""
    errors, warnings, runtag, answered = [], [], None, dict.fromkeys(topics, 0)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            errors.append(f"{n}: JSON")
            continue
        missing = [
            f for f in ("run_id", "topic_id", "topic", "references", "response_length", "answer") if f not in obj
        ]
        if missing:
            errors.append(f"{n}: missing {missing[0]}")
            continue
        runtag = obj["run_id"] if runtag is None else runtag
        if obj["run_id"] != runtag:
            errors.append(f"{n}: run tag")
        if obj["topic_id"] not in topics:
            errors.append(f"{n}: unknown topic")
            continue
        if obj["topic"] != topics[obj["topic_id"]]:
            errors.append(f"{n}: topic text")
        seen: set[str] = set()
        for ref in obj["references"]:
            if not MARCODOC.match(ref):
                errors.append(f"{n}: docno {ref}")
            elif ref in seen:
                errors.append(f"{n}: duplicate {ref}")
            seen.add(ref)
        if len(obj["references"]) > 20:
            errors.append(f"{n}: > 20 references")
        length = 0
        for sentence in obj["answer"]:
            length += official_words(sentence["text"])
            cites = sentence["citations"]
            errors += [f"{n}: citation {c}" for c in set(cites) if not 0 <= c < len(obj["references"])]
            if len(cites) != len(set(cites)):
                warnings.append(f"{n}: duplicate citations")
        if length > 400:
            warnings.append(f"{n}: too long ({length} words)")
            while length > 400 and obj["answer"]:
                length -= official_words(obj["answer"].pop()["text"])
        if length != obj["response_length"]:
            warnings.append(f"{n}: response_length {obj['response_length']} != {length}")
        answered[obj["topic_id"]] += 1
    errors += [f"topic {t} answered {k} times" for t, k in answered.items() if k > 1]
    warnings += [f"topic {t} unanswered" for t, k in answered.items() if k == 0]
    return errors, warnings


def official_2025(path: Path, topics: dict[str, str]) -> tuple[list[str], list[str]]:
    """(errors, fixes) of the 2025 validator (citation format 1, its default fixes on) on ``path``."""
    errors, fixes = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        entry = json.loads(line)
        refs = entry.get("references", [])
        if len(dict.fromkeys(refs)) != len(refs) or len(refs) > 100:
            fixes.append(f"{n}: references")
        length = sum(official_words(a.get("text", "")) for a in entry.get("answer", []))
        if length > 400:
            fixes.append(f"{n}: length {length}")
        md = entry.get("metadata")
        if not isinstance(md, dict):
            errors.append(f"{n}: metadata")
            continue
        if {"team_id", "run_id", "narrative_id"} - md.keys():
            errors.append(f"{n}: metadata keys")
        elif str(md["narrative_id"]) not in topics:
            errors.append(f"{n}: narrative_id")
        if "type" in md and md["type"] not in {"manual", "automatic"}:
            errors.append(f"{n}: type {md['type']}")
        if not isinstance(refs, list) or not isinstance(entry.get("answer", []), list):
            errors.append(f"{n}: lists")
            continue
        for a in entry.get("answer", []):
            if (
                not isinstance(a, dict)
                or not isinstance(a.get("text"), str)
                or not isinstance(a.get("citations"), list)
            ):
                errors.append(f"{n}: sentence")
            elif not all(isinstance(c, int) and 0 <= c < len(refs) for c in a["citations"]):
                errors.append(f"{n}: citations")
    return errors, fixes


# ------------------------------------------------------------------ item 20: one word count, the official one

#: Text whose whitespace count and NFKC count differ: NFKC turns the spacing accents into a space + a mark.
NFKC_TEXTS = {
    "isn´t": 2,
    "x¨y": 2,
    "a˜b": 2,
    "don´t stop": 3,
    "a\u00a0b": 2,
    "ﬁne": 1,
    "Ｆｕｌｌ width": 2,
    "½ cup": 2,
    "zero\u200bwidth": 1,
    "  padded\u3000text  ": 2,
}


def test_word_count_is_the_official_checkers_count():
    for text, expected in NFKC_TEXTS.items():
        assert word_count(text) == official_words(text) == expected, text
    assert len("isn´t".split()) == 1  # the whitespace count the project used to have


#: 6 whitespace tokens, 7 words: a cut after 399 words cannot keep ``Isn´t`` (2 words).
SENTENCE = "Isn´t it what the ﬁle says?"


def nfkc_answer(sentences: int) -> list[CitedSentence]:
    assert word_count(SENTENCE) == 7 and len(SENTENCE.split()) == 6
    return [CitedSentence(text=SENTENCE, citations=[i % 3]) for i in range(sentences)]


@pytest.mark.parametrize("year", [2024, 2025])
def test_runs_we_write_pass_the_official_checkers(shared_data, tmp_path, year):
    name = "topics.rag24.test.txt" if year == 2024 else "topics.rag25.test.jsonl"
    topics = (read_tsv if year == 2024 else read_jsonl)(shared_data / "trec-rag" / name)[:40]
    out = tmp_path / "run.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for t in topics:  # 462 official words, 396 whitespace words: over the limit only by the official count
            answer = RagAnswer(topic_id=t.qid, topic=t.text, references=SEGS, answer=nfkc_answer(66))
            f.write(json.dumps(answer_record(answer, year=year, run_id="r1", topic_text=t.text)) + "\n")
    expected = {t.qid: t.text for t in topics}
    ours = validate(out, expected)
    assert ours.ok, [str(p) for p in ours.problems[:3]]
    # 2025 without --with-prompt: the official validator's one warning per line, and ours
    assert [p.message for p in ours.warnings] == ["optional field 'prompt' is missing from metadata"] * (
        len(topics) if year == 2025 else 0
    )
    if year == 2024:
        errors, warnings = official_2024(out, expected)
        assert errors == [] and warnings == []  # no length fix, response_length as they count it
        assert {r["response_length"] for r in map(json.loads, out.read_text().splitlines())} == {399}  # 57 x 7
    else:
        assert official_2025(out, expected) == ([], [])  # nothing left for their fixes to do


def test_validator_and_fix_count_like_the_official_checker(tmp_path):
    """Over 400 words by the official count only: an error for us (the official checker rewrites it), and
    ``--fix`` leaves what the official checker accepts unchanged."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("t1\twhat is x\n")
    sentences = [s.model_dump() for s in nfkc_answer(58)]  # 406 words, 348 by whitespace
    record = {
        "run_id": "r",
        "topic_id": "t1",
        "topic": "what is x",
        "references": SEGS[:3],
        "response_length": 348,
        "answer": sentences,
    }
    run = tmp_path / "run.jsonl"
    run.write_text(json.dumps(record, ensure_ascii=False) + "\n")
    errors, warnings = official_2024(run, {"t1": "what is x"})
    assert errors == [] and any("too long (406 words)" in w for w in warnings)
    result = cli.invoke(app, ["validate", str(run), "--topics", str(topics)])
    assert result.exit_code == 1 and "response_length is 348 but the answer has 406 words" in result.output
    assert "406 words; at most 400" in result.output
    fixed = tmp_path / "fixed.jsonl"
    result = cli.invoke(app, ["validate", str(run), "--topics", str(topics), "--fix", str(fixed)])
    assert result.exit_code == 0, result.output
    assert official_2024(fixed, {"t1": "what is x"}) == ([], [])
    line = json.loads(fixed.read_text())
    assert line["response_length"] == 399 == sum(official_words(s["text"]) for s in line["answer"])
    assert len(line["answer"]) == 57  # the 58th would start with ``Isn´t``: 2 words, 1 left


# ------------------------------------------------------------------ items 21-24: the validator's verdicts


def record_2025(tid: str, text: str, **metadata) -> dict:
    meta = {"team_id": "t", "run_id": "r", "type": "automatic", "narrative_id": tid, "narrative": text, **metadata}
    return {"metadata": meta, "references": SEGS[:2], "answer": [{"text": "X is so.", "citations": [0, 1]}]}


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_2025_type_accepts_exactly_what_the_official_checker_accepts(tmp_path):
    topics = {"1": "what is x"}
    for value, accepted in [
        ("automatic", True),
        ("manual", True),
        ("semi-automatic", False),
        ("Automatic", False),
        ("", False),
    ]:
        run = write_lines(tmp_path / "run.jsonl", [record_2025("1", "what is x", type=value)])
        ours, (theirs, _) = validate(run, topics), official_2025(run, topics)
        assert ours.ok == accepted == (not theirs), (value, [str(p) for p in ours.problems], theirs)
        if not accepted:
            assert any(
                f"metadata.type must be one of automatic, manual, got {value!r}" in p.message for p in ours.errors
            )
    bare = record_2025("1", "what is x")
    del bare["metadata"]["type"], bare["metadata"]["narrative"]  # optional for them: warnings, not errors
    run = write_lines(tmp_path / "run.jsonl", [bare])
    ours = validate(run, topics)
    assert ours.ok and official_2025(run, topics) == ([], [])
    assert {p.message for p in ours.warnings} == {
        "optional field 'type' is missing from metadata",
        "optional field 'narrative' is missing from metadata",
        "optional field 'prompt' is missing from metadata",
    }


def test_run_refuses_a_run_type_the_track_rejects(tmp_path):
    result = cli.invoke(
        app,
        [
            "run",
            "--topics",
            "demo",
            "--pipeline",
            "bm25@10 | extractive",
            "--year",
            "2025",
            "--run-type",
            "semi-automatic",
            "--output",
            str(tmp_path / "o.jsonl"),
        ],
    )
    assert result.exit_code == 2 and "--run-type must be one of automatic, manual" in result.output
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_run_is_invalid_with_or_without_topics(tmp_path, content):
    run = tmp_path / "run.jsonl"
    run.write_text(content)
    topics = tmp_path / "topics.tsv"
    topics.write_text("t1\twhat is x\n")
    for extra in ([], ["--topics", str(topics)]):
        result = cli.invoke(app, ["validate", str(run), *extra])
        assert result.exit_code == 1 and "the run is empty" in result.output and "INVALID" in result.output


def test_topic_text_difference_says_where(tmp_path):
    expected = "what are the long-term effects of " + "x" * 40 + " on the human body and mind?"
    given = expected.replace("body", "b0dy")  # differs after the first 60 characters
    offset = expected.index("body") + 1
    run = write_lines(
        tmp_path / "run.jsonl",
        [
            {
                "run_id": "r",
                "topic_id": "t1",
                "topic": given,
                "references": [],
                "response_length": 1,
                "answer": [{"text": "X.", "citations": []}],
            }
        ],
    )
    (message,) = [p.message for p in validate(run, {"t1": expected}).errors]
    assert f"at offset {offset} ('0' vs 'o'; lengths {len(given)} and {len(expected)})" in message
    assert "human b0dy and" in message and "human body and" in message and len(message) < 300
    # one text a prefix of the other: the offset is where the shorter ends
    run = write_lines(tmp_path / "run.jsonl", [record_2025("t1", expected[:-1])])
    (message,) = [p.message for p in validate(run, {"t1": expected}).errors]
    assert f"at offset {len(expected) - 1} (the end vs '?'" in message


def test_resume_with_another_year_is_refused_before_anything_loads(tmp_path):
    """A 2024 file resumed with --year 2025 (and back) fails at once: no line added, no index built."""
    for have, want in ((2024, 2025), (2025, 2024)):
        out = tmp_path / f"run{have}.jsonl"
        answer = RagAnswer.build("1", "what is x", SEGS[:1], [CitedSentence(text="X is.", citations=[0])])
        out.write_text(json.dumps(answer_record(answer, year=have, run_id="r", topic_text="what is x")) + "\n")
        before = out.read_bytes()
        start = time.monotonic()
        result = cli.invoke(
            app,
            [
                "run",
                "--topics",
                "demo",
                "--pipeline",
                "bm25@10 | extractive",
                "--run-id",
                "r",
                "--year",
                str(want),
                "--output",
                str(out),
            ],
        )
        assert result.exit_code == 2, result.output
        assert f"is a {have}-format line, not --year {want}" in result.output
        assert out.read_bytes() == before and time.monotonic() - start < 10
    assert not (tmp_path / "data" / "indexes").exists()  # the demo index was not built for a refused run


def test_resume_with_another_2025_team_or_type_is_refused(tmp_path):
    out = write_lines(tmp_path / "run.jsonl", [record_2025("1", "what is x", team_id="team", run_id="r")])
    base = [
        "run",
        "--topics",
        "demo",
        "--pipeline",
        "bm25@10 | extractive",
        "--run-id",
        "r",
        "--year",
        "2025",
        "--output",
        str(out),
    ]
    result = cli.invoke(app, [*base, "--team-id", "other"])
    assert result.exit_code == 2 and "metadata.team_id 'team', not 'other'" in result.output
    result = cli.invoke(app, [*base, "--team-id", "team", "--run-type", "manual"])
    assert result.exit_code == 2 and "metadata.type 'automatic', not 'manual'" in result.output


# ------------------------------------------------------------------ item 25: fail early, leave nothing


@pytest.mark.parametrize(
    ("pipeline", "extra", "message"),
    [
        ("bm25@10 | gpt-9", [], "unknown generator 'gpt-9'"),
        ("bm25@10 | extractive:nope", [], "unknown prompt template 'nope'"),
        ("bm25@10 | nope@5 | extractive", [], "unknown reranker 'nope'"),
        ("rrf(bm25, nope)@10 | extractive", [], "unknown retriever 'nope'"),
        ("bm25@10 | extractive", ["--index", "nope"], "unknown index 'nope'"),
        ("2c", [], "unknown generator 'llama-3.1-70b'"),
    ],
)
def test_unknown_components_fail_before_anything_loads(tmp_path, pipeline, extra, message):
    out = tmp_path / "run.jsonl"
    start = time.monotonic()
    result = cli.invoke(app, ["run", "--topics", "demo", "--pipeline", pipeline, "--output", str(out), *extra])
    assert result.exit_code == 2 and message in result.output, result.output
    assert time.monotonic() - start < 10
    assert not out.exists() and not (tmp_path / "data" / "indexes").exists()


def test_unknown_generator_imports_nothing_heavy(tmp_path):
    """Through the installed CLI in a fresh process: the refusal comes before the JVM, torch or any model."""
    probe = textwrap.dedent(f"""
        import sys
        from typer.testing import CliRunner
        from ragnarok.cli.main import app
        result = CliRunner().invoke(app, ["run", "--topics", "demo", "--pipeline", "bm25@10 | gpt-9",
                                          "--output", {str(tmp_path / "run.jsonl")!r}])
        heavy = [m for m in ("jnius", "pyserini", "torch", "sentence_transformers", "faiss", "llama_cpp",
                             "api.main") if m in sys.modules]
        print(result.exit_code, heavy, result.output.strip())
    """)
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("2 [] error: unknown generator 'gpt-9'"), (done.stdout, done.stderr[-2000:])
    assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize("content", ["", "\n", "\n  \n"])
def test_an_empty_topic_file_is_an_error(tmp_path, content):
    topics = tmp_path / "topics.tsv"
    topics.write_text(content)
    out = tmp_path / "run.jsonl"
    result = cli.invoke(
        app, ["run", "--topics", str(topics), "--pipeline", "bm25@10 | extractive", "--output", str(out)]
    )
    assert result.exit_code == 2 and f"{topics}: no topics in the file" in result.output
    assert not out.exists()


GIVEN = [
    {
        "query": {"text": text, "qid": qid},
        "candidates": [
            {"docid": SEGS[0], "score": 2.0, "doc": {"segment": f"{text.capitalize()} is answered here. It is so."}},
            {"docid": SEGS[1], "score": 1.0, "doc": {"segment": "Another passage says more. It holds more words."}},
        ],
    }
    for qid, text in (("q1", "how to compress a file"), ("q2", "what is a list"))
]


def test_a_refused_run_leaves_no_file(tmp_path):
    """The generator refuses every topic (no API key: 422 from the AG stage), so nothing is written: no file."""
    given = write_lines(tmp_path / "given.jsonl", GIVEN)
    out = tmp_path / "run.jsonl"
    result = cli.invoke(app, ["run", "--requests", str(given), "--pipeline", "gpt-4o", "--output", str(out)])
    assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.output
    assert not out.exists()
    log = JsonLinesLog(out, lambda r: r.get("topic_id")).open()
    log.close()
    assert not out.exists()  # opened, nothing appended: nothing created


def test_every_output_is_a_normal_file(tmp_path):
    """JSONL answers, the r task's run file and ``--fix`` copies: all 0666 less the umask (0644 under 022)."""
    given = write_lines(tmp_path / "given.jsonl", GIVEN)
    old = os.umask(0o022)
    try:
        answers = tmp_path / "answers.jsonl"
        result = cli.invoke(
            app,
            ["run", "--requests", str(given), "--pipeline", "extractive", "--run-id", "r", "--output", str(answers)],
        )
        assert result.exit_code == 0, result.output
        fixed = tmp_path / "fixed.jsonl"
        result = cli.invoke(app, ["validate", str(answers), "--fix", str(fixed)])
        assert result.exit_code == 0, result.output
        options = TrackOptions(run_id="r", output=tmp_path / "bm25.run", task="r")
        write_lines(options.log_path, GIVEN)
        write_r_run(options)
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (answers, fixed, options.output)}
        assert modes == dict.fromkeys(modes, 0o644), {k: oct(v) for k, v in modes.items()}
        os.umask(0o077)
        write_r_run(options)
        assert stat.S_IMODE(options.output.stat().st_mode) == 0o600  # the umask decides, as for any file
    finally:
        os.umask(old)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
