"""The server's numpy runs its matrix products on ``Settings.blas_threads`` BLAS threads (default 1), set when
the app starts; 0 leaves the library's own pool.

OpenBLAS keeps a thread's own setting beside the process's: each reading and setting here runs in a thread of
its own, as a request's work does (a worker thread that never set one reads the process's)."""

import threading

from servers import serve_app
from threadpoolctl import threadpool_info, threadpool_limits

from api.main import create_app
from ragnarok.runtime.blas import limit_blas_threads


def _in_a_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def _blas_threads() -> set[int]:
    return _in_a_thread(lambda: {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})


def _set(threads: int) -> None:
    _in_a_thread(lambda: threadpool_limits(limits=threads, user_api="blas"))


def test_the_server_starts_with_one_blas_thread(demo_settings):
    before = _blas_threads()
    _set(2)  # as a library could leave it
    try:
        assert _blas_threads() == {2}
        with serve_app(create_app(demo_settings, arena=False)):
            assert _blas_threads() == {1}
    finally:
        _set(max(before))


def test_zero_leaves_the_pool_as_it_is():
    before = _blas_threads()
    _set(2)
    try:
        assert _in_a_thread(lambda: limit_blas_threads(0)) is None
        assert _blas_threads() == {2}
        assert _in_a_thread(lambda: limit_blas_threads(1)) == 1
        assert _blas_threads() == {1}
    finally:
        _set(max(before))
