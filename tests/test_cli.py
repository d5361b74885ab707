"""The CLI: help on every command, and bad input as one line on stderr with exit code 2."""

import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = ["serve", "index", "search", "eval"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command):
    out = run(command, "--help")
    assert out.returncode == 0 and "Usage" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "/nonexistent/qrels", "/nonexistent/run"], "cannot read qrels"),
        (["search", "--topics", "nope", "--output", "x.txt"], "unknown topic set or file 'nope'"),
        (["index", "/nonexistent", "/tmp/x", "--collection", "HtmlCollection"], "collection not found"),
        (["index", "/nonexistent.jsonl", "/tmp/x"], "collection not found"),
        (["index"], "give INPUT and OUTPUT"),
        (["index", "--from-lucene", "/nonexistent"], "give --dense MODEL"),
    ],
)
def test_errors_are_one_line(args, message, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], out.stderr[-1000:]
    assert "Traceback" not in out.stderr


def test_malformed_collection_line_is_reported(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"docid": "a", "body": "x."}\n{"docid": \n')
    out = run("index", str(tmp_path / "docs.jsonl"), str(tmp_path / "idx"))
    assert out.returncode == 2 and "docs.jsonl:2: malformed JSON" in out.stderr
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_serve_on_a_busy_port_fails_in_one_line_before_any_start_up_work(host, tmp_path):
    """A port in use: one ``error:`` line naming it (an IPv6 host in brackets), exit 2, no banner, and nothing
    done first (the demo index, minutes of work, is not built into the empty data dir)."""
    import os
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as busy:
        busy.bind((host, 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
        out = subprocess.run(
            [sys.executable, "-m", "ragnarok.cli", "serve", "--host", host, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env=env,
        )
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and not out.stdout, out.stderr
    assert f"port {port} is already in use on {shown}" in out.stderr and "serving at" not in out.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1"])
def test_serve_refuses_a_port_that_is_no_tcp_port(port, tmp_path):
    """Before any work: 99999 was served on 34463 (its low 16 bits) while the banner said 99999."""
    import os

    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "serve", f"--port={port}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 2 and out.stderr == f"error: port {port} is not a TCP port: give one from 1 to 65535\n"
    assert not (tmp_path / "data").exists()


def test_urls_put_an_ipv6_host_in_brackets():
    from ragnarok.runtime.netaddr import http_url, is_loopback

    assert http_url("::1", 8152) == "http://[::1]:8152" == http_url("[::1]", 8152)
    assert http_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert http_url("localhost", 80, "https") == "https://localhost:80"
    assert is_loopback("[::1]") and not is_loopback("::")


def test_the_arena_alone_defaults_to_a_bracketed_ipv6_gateway(tmp_path):
    import os

    env = {**os.environ, "RAGNAROK_HOST": "::1", "RAGNAROK_PORT": "8152"}
    out = subprocess.run(
        [sys.executable, "-m", "webui", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "http://[::1]:8152" in " ".join(out.stdout.split()), out.stdout


def test_serve_banner_brackets_an_ipv6_host(demo_settings, tmp_path, slowdown):
    """``ragnarok serve --host ::1``: the banner names ``http://[::1]:PORT``, where the server answers."""
    import os
    import time

    import httpx
    from servers import free_port

    port = free_port()
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--host", "::1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120 * slowdown
            while "serving at" not in log.read_text() and server.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            text = log.read_text()
            assert f"ragnarok serving at http://[::1]:{port} " in text, text[-3000:]
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://[::1]:{port}/healthz", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            assert httpx.get(f"http://[::1]:{port}/healthz", timeout=5).status_code == 200
        finally:
            server.terminate()
            server.wait(timeout=60)
