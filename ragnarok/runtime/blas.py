"""The BLAS thread pool of this process's numpy, sized once when a server starts (``Settings.blas_threads``)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def limit_blas_threads(threads: int) -> int | None:
    """At most ``threads`` BLAS threads for every BLAS library loaded now (numpy's, and torch's when loaded);
    0 leaves them as they are. Returns the limit set, or None when nothing was changed. Libraries loaded
    later keep their own default."""
    if threads <= 0:
        return None
    import numpy  # noqa: F401, PLC0415 - its BLAS must be loaded to be limited
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    threadpool_limits(limits=threads, user_api="blas")
    log.debug("BLAS limited to %d thread(s)", threads)
    return threads
