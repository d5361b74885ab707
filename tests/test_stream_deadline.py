"""A generator's deadline bounds the whole answer as the client sees it, streamed or not, while the
CPU is busy (hog processes, bounded in time, started by the test): against a backend that never finishes, a
deadline of a few seconds is answered within the deadline and a small margin (scaled by the machine's
``slowdown``), the wait for a slot and the post-processing included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from httpx_sse import connect_sse
from servers import serve_app
from sse_fakes import Script, streaming_openai_app
from test_api_stream import CANDIDATES
from test_network_defects import hung_backend

DEADLINE_S = 3.0
HOG = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\nwhile time.monotonic() < end: pass"


@contextmanager
def cpu_hogs(seconds: float) -> Iterator[None]:
    """Two busy processes per core, each ending on its own after ``seconds`` (and killed on the way out)."""
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(seconds)]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture(scope="module")
def service(demo_settings):
    from api.main import create_app
    from ragnarok.core.settings import Settings
    from ragnarok.stages.generate.base import GeneratorConfig

    # endless: 2,000 sentences, one every 10 ms streamed (20 s), or at once (their post-processing takes seconds)
    endless = streaming_openai_app(
        Script(pieces=[f" Step {i} parses one more argument [1]." for i in range(2000)], each_wait_s=0.01)
    )
    with hung_backend() as (hung_url, _, _), serve_app(endless) as endless_url:
        generators = [
            GeneratorConfig(
                name=name,
                backend="openai",
                base_url=url,
                model="fake",
                max_retries=0,
                timeout_s=DEADLINE_S,
                max_concurrency=1,
                attribution="check",
            )
            for name, url in [("hung", hung_url), ("endless", endless_url + "/v1")]
        ]
        settings = Settings(data_dir=demo_settings.data_dir, generators=generators)
        with serve_app(create_app(settings, arena=False)) as url:
            yield url


def timed(url: str, generator: str, stream: bool) -> tuple[float, int, list[str]]:
    """The seconds until the answer was complete, its status (a stream's: its ``error`` event's, if it ended
    with one), and the events' names when streamed."""
    body = {"request": CANDIDATES, "generator": generator, "stream": stream}
    start, names = time.monotonic(), []
    with httpx.Client(timeout=120) as client:
        if not stream:
            status = client.post(url + "/v1/generate", json=body).status_code
        else:
            with connect_sse(client, "POST", url + "/v1/generate", json=body) as source:
                status = source.response.status_code
                if status != 200:
                    source.response.read()
                for sse in source.iter_sse() if status == 200 else []:
                    names.append(sse.event)
                    if sse.event == "error":
                        status = json.loads(sse.data)["status"]
    return time.monotonic() - start, status, names


@pytest.mark.parametrize("generator, stream", [("hung", False), ("hung", True), ("endless", False), ("endless", True)])
def test_the_deadline_bounds_the_answer_while_the_cpu_is_busy(service, slowdown, generator, stream):
    margin_s = 1.0 * slowdown
    with cpu_hogs(DEADLINE_S + 30 * slowdown):
        elapsed, status, names = timed(service, generator, stream)
    assert status == 504, (status, names[-3:])
    assert elapsed < DEADLINE_S + margin_s, (elapsed, margin_s)
