"""``ragnarok doctor [--json]`` on a healthy setup and on broken ones; ``ragnarok --version``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from servers import free_port

from ragnarok.cli import doctor
from ragnarok.stages.generate.base import GeneratorConfig

ROOT = Path(__file__).resolve().parent.parent


def run_doctor(settings, capsys) -> tuple[int, dict]:
    code = doctor.main(settings, as_json=True)
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict[tuple[str, str], dict]:
    return {(c["section"], c["name"]): c for c in report["checks"]}


def test_a_healthy_setup_can_serve(demo_settings, tmp_path, monkeypatch):
    """The real command: exit 0, JSON naming Java, the demo index's segments, generators, the database."""
    monkeypatch.setenv("SECRET_FOR_DOCTOR", "sk-never-printed-42")
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "RAGNAROK_GENERATORS": json.dumps(
            [{"name": "keyed", "backend": "openai", "model": "x", "api_key_env": "SECRET_FOR_DOCTOR"}]
        ),
    }
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "doctor", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "sk-never-printed-42" not in out.stdout + out.stderr
    report = json.loads(out.stdout)
    checks = by_name(report)
    assert report["ok"] is True and report["missing"] == []
    java = checks[("java", "java")]
    assert java["status"] == "ok" and java["detail"]["version"] >= 21 and Path(java["detail"]["java"]).exists()
    demo = checks[("index", "demo")]
    assert demo["status"] == "ok" and demo["detail"]["exists"] and demo["detail"]["segments"] > 1000
    assert demo["detail"]["dense"]["minilm"] in ("missing", "up to date")
    assert checks[("generator", "extractive")]["status"] == "ok"
    keyed = checks[("generator", "keyed")]["detail"]
    assert keyed["key_env"] == "SECRET_FOR_DOCTOR" and keyed["key_present"] is True
    assert checks[("generator", "gpt-4o")]["status"] == "off"  # a built-in nobody configured: not a failure
    database = checks.get(("database", "sqlite")) or checks[("database", "database")]
    assert database["status"] == "ok" and database["detail"]["latest"] >= 8
    assert checks[("disk", "data_dir")]["detail"]["free_bytes"] > 0
    text = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "doctor"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert text.returncode == 0 and text.stdout.strip().endswith("the default setup can serve"), text.stdout


def test_a_missing_index_fails_naming_the_fix(demo_settings, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    settings = demo_settings.model_copy(update={"indexes": {"team": str(missing)}})
    code, report = run_doctor(settings, capsys)
    assert code == 1 and report["ok"] is False
    team = by_name(report)[("index", "team")]
    assert team["status"] == "fail" and team["detail"]["exists"] is False and str(missing) in team["problem"]
    assert team["fix"].startswith("ragnarok index ")
    assert any(m.startswith("index team:") for m in report["missing"])
    fresh = demo_settings.model_copy(update={"data_dir": tmp_path / "empty"})  # the demo index not built yet
    code, report = run_doctor(fresh, capsys)
    assert code == 1 and by_name(report)[("index", "demo")]["fix"] == "ragnarok index --demo"


def test_an_unreachable_generator_fails(demo_settings, capsys):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    settings = demo_settings.model_copy(
        update={
            "generators": [GeneratorConfig(name="vllm", backend="openai", base_url=dead, model="m")],
            "generator_probe_timeout_s": 1,
        }
    )
    code, report = run_doctor(settings, capsys)
    vllm = by_name(report)[("generator", "vllm")]
    assert code == 1 and vllm["status"] == "fail" and vllm["detail"]["reachable"] is False
    assert "not reachable" in vllm["problem"] and dead in vllm["fix"]


def test_a_missing_key_fails_naming_the_variable(demo_settings, capsys, monkeypatch):
    monkeypatch.delenv("TEAM_LLM_KEY", raising=False)
    settings = demo_settings.model_copy(
        update={
            "generators": [
                GeneratorConfig(name="team", backend="openai", model="gpt-4o-mini", api_key_env="TEAM_LLM_KEY")
            ]
        }
    )
    code, report = run_doctor(settings, capsys)
    team = by_name(report)[("generator", "team")]
    assert code == 1 and team["status"] == "fail" and team["detail"]["key_present"] is False
    assert team["problem"] == "TEAM_LLM_KEY is not set" and team["fix"] == "export TEAM_LLM_KEY=..."
    capsys.readouterr()
    assert doctor.main(settings, as_json=False) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("1 problem(s): generator team (export TEAM_LLM_KEY=...)")


def test_an_unreachable_database_fails(demo_settings, capsys):
    settings = demo_settings.model_copy(update={"database_url": f"postgresql://nobody@127.0.0.1:{free_port()}/x"})
    code, report = run_doctor(settings, capsys)
    database = by_name(report)[("database", "database")]
    assert code == 1 and database["status"] == "fail" and database["detail"]["reachable"] is False


def test_lucene_documents_reads_the_segment_infos(demo_settings):
    """The count read from the segment info files without the JVM is Lucene's own."""
    from ragnarok.core.java import import_pyserini_search

    searcher = import_pyserini_search().LuceneSearcher(str(demo_settings.demo_index_dir))
    assert doctor.lucene_documents(demo_settings.demo_index_dir) == searcher.num_docs > 1000
    assert doctor.lucene_documents(demo_settings.data_dir / "nothing") == 0


def test_version(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "--version"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.startswith("ragnarok 0."), out.stdout + out.stderr


def test_doctor_help():
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "doctor", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0 and "--json" in out.stdout


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory no file can be made in, for real. Tests run as root here, where a chmod stops nothing: a
    read-only tmpfs is mounted on it (CAP_SYS_ADMIN), else it is made immutable (``chattr +i``); as another
    user a chmod is enough."""
    path = tmp_path / "ro"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], capture_output=True).returncode
        == 0
    ):
        yield path
        subprocess.run(["umount", str(path)], check=True)
        return
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        yield path
        subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    pytest.skip("no way to make a read-only directory as root here (no mount, no chattr)")


def test_a_read_only_data_dir_fails_naming_the_fix(demo_settings, read_only_dir, capsys):
    with pytest.raises(OSError):  # what `ragnarok keys create` and every build would meet
        (read_only_dir / "probe").write_text("x")
    code, report = run_doctor(demo_settings.model_copy(update={"data_dir": read_only_dir}), capsys)
    writable = by_name(report)[("data_dir", "writable")]
    assert code == 1 and writable["status"] == "fail" and writable["detail"]["writable"] is False
    assert str(read_only_dir) in writable["problem"] and "RAGNAROK_DATA_DIR" in writable["fix"]
    assert any(m.startswith("data_dir writable:") for m in report["missing"])
    assert list(read_only_dir.iterdir()) == []
    code, report = run_doctor(demo_settings, capsys)  # a writable one passes, and keeps no file of the doctor's
    assert by_name(report)[("data_dir", "writable")]["status"] == "ok"
    assert not list(demo_settings.data_dir.glob(".ragnarok-doctor-*"))


def test_the_auth_mode_keys_and_a_refused_host_are_reported(demo_settings, tmp_path, capsys):
    from ragnarok.auth.store import AuthStore

    code, report = run_doctor(demo_settings, capsys)
    auth = by_name(report)[("auth", "off")]
    assert auth["status"] == "ok" and auth["detail"] == {"mode": "off", "host": "127.0.0.1", "host_refused": False}
    code, report = run_doctor(demo_settings.model_copy(update={"host": "0.0.0.0"}), capsys)
    auth = by_name(report)[("auth", "off")]  # a warning: `serve --insecure-open` (the Docker image) serves there
    assert code == 0 and auth["status"] == "warn" and auth["detail"]["host_refused"] is True
    assert "0.0.0.0" in auth["problem"] and "RAGNAROK_AUTH=keys" in auth["fix"]

    keyed = demo_settings.model_copy(
        update={"auth": "keys", "host": "0.0.0.0", "database_url": f"sqlite:///{tmp_path / 'keys.db'}"}
    )
    store = AuthStore.for_settings(keyed)  # the database, migrated, without a key
    code, report = run_doctor(keyed, capsys)
    keys = by_name(report)[("auth", "keys")]
    assert code == 1 and keys["status"] == "fail" and keys["detail"]["active_keys"] == 0
    assert keys["detail"]["host_refused"] is False and keys["fix"].startswith("ragnarok keys create")
    record, _ = store.create("ops", ["admin"])
    code, report = run_doctor(keyed, capsys)
    assert by_name(report)[("auth", "keys")]["status"] == "ok"
    assert by_name(report)[("auth", "keys")]["detail"]["active_keys"] == 1
    store.revoke(str(record.id))
    code, report = run_doctor(keyed, capsys)
    assert by_name(report)[("auth", "keys")]["detail"]["active_keys"] == 0


def test_a_database_url_with_an_ipv6_host_is_shown_without_its_password():
    assert doctor._shown("postgresql://ops:s3cret@[::1]:5432/ragnarok") == "postgresql://ops:***@[::1]:5432/ragnarok"
