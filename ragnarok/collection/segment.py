"""Sliding-window segmentation, as MS MARCO V2.1 segmented was built: windows of 10 sentences, stride 5.

A document ``{docid, url, title, headings, body}`` becomes segments ``{docid: "{docid}#{n}_{start_char}",
url, title, headings, segment, start_char, end_char}`` where ``body[start_char:end_char] == segment``
(start inclusive, end exclusive). Sentences come from blingfire (a compiled, offline sentence splitter
that reports character offsets); a blank line always ends a sentence, so a heading or a list never runs
into the paragraph after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ragnarok.core.sentences import _PARAGRAPH, sentence_spans  # noqa: F401 - re-exported (their old home)

WINDOW = 10
STRIDE = 5


@dataclass(frozen=True)
class Segmenter:
    window: int = WINDOW
    stride: int = STRIDE

    def __post_init__(self) -> None:
        if self.window < 1 or not 1 <= self.stride <= self.window:
            raise ValueError(f"need window >= 1 and 1 <= stride <= window, got {self.window}/{self.stride}")

    def spans(self, body: str) -> list[tuple[int, int]]:
        """Character spans ``(start, end)`` of the windows over ``body``'s sentences."""
        sentences = self.sentences(body)
        spans = []
        for i in range(0, len(sentences), self.stride):
            chunk = sentences[i : i + self.window]
            spans.append((chunk[0][0], chunk[-1][1]))
            if i + self.window >= len(sentences):
                break
        return spans

    def sentences(self, body: str) -> list[tuple[int, int]]:
        """Character spans of ``body``'s sentences (subclasses may compute the same spans faster)."""
        return sentence_spans(body)

    def segment(self, document: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The segments of one document, in order."""
        body = document.get("body") or ""
        for n, (start, end) in enumerate(self.spans(body)):
            yield {
                "docid": f"{document['docid']}#{n}_{start}",
                "url": document.get("url", ""),
                "title": document.get("title", ""),
                "headings": document.get("headings", ""),
                "segment": body[start:end],
                "start_char": start,
                "end_char": end,
            }
