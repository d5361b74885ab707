import pytest

from ragnarok.core.spec import Fusion, Generate, Pipeline, Rerank, Source, SpecError, parse
from ragnarok.core.spec_mapping import from_mapping, load

PAPER = "rrf(bm25+rocchio, dense:minilm)@3000 | monot5@100~rrf | rankzephyr@20 | gpt-4o:chatqa"


def test_the_full_grammar():
    p = parse(PAPER)
    assert p == Pipeline(
        retrieve=Fusion("rrf", (Source("bm25+rocchio"), Source("dense", "minilm"))),
        depth=3000,
        rerank=(Rerank("monot5", 100, fuse="rrf"), Rerank("rankzephyr", 20)),
        generate=Generate("gpt-4o", "chatqa"),
    )
    assert str(p) == PAPER and parse(str(p)) == p
    assert [s.name for s in p.sources()] == ["bm25+rocchio", "dense"]


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("bm25", "bm25@100"),
        ("  bm25+rm3 @ 1000|extractive ", "bm25+rm3@1000 | extractive"),
        (
            "cc(bm25=0.3, dense:minilm=0.7)@50 | mmr:0.5@20 | smollm2:ragnarok",
            "cc(bm25=0.3, dense:minilm=0.7)@50 | mmr:0.5@20 | smollm2:ragnarok",
        ),
        ("rrf(bm25, dbsf(bm25+rm3, dense))@10", "rrf(bm25, dbsf(bm25+rm3, dense))@10"),
    ],
)
def test_canonical_forms(spec, canonical):
    assert str(parse(spec)) == canonical


@pytest.mark.parametrize(
    ("spec", "message", "pos"),
    [
        ("", "empty pipeline", 0),
        ("bm25@0", "expected a depth after '@' (a positive integer), found '0'", 5),
        ("bm25 | x | y", "nothing may follow the generator stage, found '|'", 9),
        ("rrf(bm25)@10", "a fusion needs at least two sources, found ')'", 8),
        ("max(bm25, x)", "unknown fusion (use rrf, cc, dbsf), found 'max'", 0),
        ("bm25 |", "expected a reranker or generator name, found the end of the spec", 6),
        ("bm25 | mmr@20~max", "unknown fusion", 14),
        ("bm25 $ 3", "unexpected character '$'", 5),
        ("rrf(bm25, dense", "expected ')', found the end of the spec", 15),
        ("bm25 extractive", "expected '|' or the end of the spec, found 'extractive'", 5),
    ],
)
def test_parse_errors_point_at_the_token(spec, message, pos):
    with pytest.raises(SpecError) as info:
        parse(spec)
    assert message in str(info.value)
    assert info.value.pos == pos
    assert str(info.value).splitlines()[-1] == "  " + " " * pos + "^"


def test_toml_and_yaml_files(tmp_path):
    (tmp_path / "p.toml").write_text(
        'retrieve = "rrf(bm25+rocchio, dense:minilm)"\ndepth = 3000\n'
        '[[rerank]]\nname = "monot5"\ndepth = 100\nfuse = "rrf"\n'
        '[[rerank]]\nname = "rankzephyr"\ndepth = 20\n'
        '[generate]\nname = "gpt-4o"\ntemplate = "chatqa"\n'
    )
    assert str(load(tmp_path / "p.toml")) == PAPER
    (tmp_path / "p.yaml").write_text(f"pipeline: '{PAPER}'\n")
    assert str(load(tmp_path / "p.yaml")) == PAPER
    with pytest.raises(ValueError, match="malformed pipeline"):
        from_mapping({"rerank": []})
