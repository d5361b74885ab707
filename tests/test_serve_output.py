"""What ``ragnarok serve`` writes and where it connects while it loads the ONNX MiniLM encoder:
with ``RAGNAROK_LOG_FORMAT=json`` every line it writes is one JSON object (one worker or two); under strace it
connects to nothing but loopback addresses and unix sockets (no telemetry, no DNS query)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest
from servers import ragnarok_serve

#: A rerank by MiniLM embeddings: the query and the candidates encoded by the ONNX encoder (exported on first use).
RERANK = {
    "request": {
        "query": {"text": "compress a file with gzip"},
        "candidates": [
            {"docid": "a", "score": 1.0, "doc": {"segment": "The gzip module compresses files."}},
            {"docid": "b", "score": 0.5, "doc": {"segment": "The csv module reads comma-separated values."}},
        ],
    },
    "reranker": "embedding",
    "k": 2,
}


def serve_env(demo_settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The demo index; an empty ONNX export cache (the model is exported, as on a first start); JSON logs at
    INFO (access lines too); no proxy (a proxy would be a configured outbound connection)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return {
        **env,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "RAGNAROK_ENCODER_BACKEND": "onnx",
        "RAGNAROK_ENCODER_CACHE_DIR": str(tmp_path / "models"),
        **extra,
    }


def load_the_onnx_encoder(base: str, tmp_path: Path, slowdown: float) -> None:
    r = httpx.post(base + "/v1/rerank", json=RERANK, timeout=600 * slowdown)
    assert r.status_code == 200, r.text
    assert [c["docid"] for c in r.json()["candidates"]] == ["a", "b"]
    assert list((tmp_path / "models" / "onnx").glob("*/model.onnx")), "the ONNX encoder was not exported"


def json_lines(path: Path) -> list[dict]:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    bad = []
    for line in lines:
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            bad.append(line)
    assert not bad, f"{len(bad)} of {len(lines)} lines are not JSON objects:\n" + "\n".join(bad[:20])
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("workers", [1, 2])
def test_json_logs_are_json_on_every_line(demo_settings, tmp_path, slowdown, workers):
    """``RAGNAROK_LOG_FORMAT=json``: the banner, uvicorn's lines, the export's warnings, whatever a library
    writes: every line of the output (stdout and stderr) parses as one JSON object."""
    out = tmp_path / "serve.log"
    env = serve_env(demo_settings, tmp_path, RAGNAROK_LOG_FORMAT="json", RAGNAROK_LOG_LEVEL="info")
    with ragnarok_serve(env, output=out, workers=workers, start_timeout_s=300 * slowdown) as base:
        load_the_onnx_encoder(base, tmp_path, slowdown)
    lines = json_lines(out)
    assert any("serving at http://127.0.0.1:" in line["message"] for line in lines)
    assert any(line["logger"] == "ragnarok.access" and line["route"] == "/v1/rerank" for line in lines)


def strace_prefix(trace: Path) -> list[str]:
    strace = shutil.which("strace")
    if strace is None:  # make system-deps installs it
        pytest.fail("strace is not installed (make system-deps)")
    # every process and thread; only the calls that reach out to an address (seccomp: the rest run untraced)
    return [
        strace,
        "-f",
        "--seccomp-bpf",
        "-qq",
        "-e",
        "signal=none",
        "-e",
        "trace=bind,connect,sendto,sendmsg,sendmmsg",
        "-o",
        str(trace),
    ]


_INET = re.compile(r'sa_family=AF_INET6?, .*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')


def outbound(trace: Path) -> list[str]:
    """The calls in ``trace`` whose address is an IPv4 or IPv6 address other than a loopback one (unix and
    netlink sockets, and sends on a connected socket, name none)."""
    found = []
    for line in trace.read_text(errors="replace").splitlines():
        match = _INET.search(line) if " bind(" not in line else None
        if match is None:
            continue
        address = ipaddress.ip_address(match.group(1) or match.group(2))
        mapped = getattr(address, "ipv4_mapped", None)
        if not (address.is_loopback or address.is_unspecified or (mapped is not None and mapped.is_loopback)):
            found.append(line)
    return found


def test_loading_the_onnx_encoder_connects_to_nothing_outside(demo_settings, tmp_path, slowdown):
    """The server under ``strace -f`` while it starts, exports and loads the ONNX MiniLM encoder and encodes a
    query: no connect/send to any address but loopback (the telemetry and DNS queries of)."""
    trace = tmp_path / "network.trace"
    started: list = []
    env = serve_env(demo_settings, tmp_path)
    with ragnarok_serve(
        env, output=tmp_path / "serve.log", prefix=strace_prefix(trace), started=started, start_timeout_s=300 * slowdown
    ) as base:
        try:
            load_the_onnx_encoder(base, tmp_path, slowdown)
        finally:  # stop the server itself: strace, signalled, would leave it running untraced
            for child in Path(f"/proc/{started[0].pid}/task/{started[0].pid}/children").read_text().split():
                os.kill(int(child), signal.SIGTERM)
            deadline = time.monotonic() + 60 * slowdown
            while started[0].poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
    port = base.rsplit(":", 1)[1]
    assert f"sin_port=htons({port})" in trace.read_text(errors="replace"), "the trace did not see the server bind"
    assert not outbound(trace), "connections outside loopback:\n" + "\n".join(outbound(trace)[:20])
