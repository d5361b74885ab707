"""Why a dense index cannot serve: each a :class:`FileNotFoundError` (the CLI's `error:` line, exit 2; the API's
503), so callers that expect a missing index handle all of them."""

from __future__ import annotations


class DenseIndexNotFoundError(FileNotFoundError):
    """No dense index (or no embedding model) where one was expected."""


class StaleDenseIndexError(DenseIndexNotFoundError):
    """A dense index that no longer matches its Lucene index (or its model): as good as missing."""


class DenseIndexMismatchError(DenseIndexNotFoundError):
    """A dense index that cannot serve as asked: an unknown kind, files of another kind than its meta.json says,
    or vectors of another dimension than the query encoder's."""
