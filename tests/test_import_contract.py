"""The import contract: ``lint-imports`` keeps the layers and finds no import circle, every
top-level module of ragnarok is named in a layer, and the check fails on a circle or an import against the
flow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ragnarok", "api", "webui")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # the venv's (import-linter, the `test` extra)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the tree at ``root``, as a subprocess. ``-S`` and an explicit path: ``ragnarok`` is
    a namespace package, and an editable install of another checkout (a shared virtual environment) would add
    that checkout's modules to the graph."""
    paths = sysconfig.get_paths()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(root), paths["purelib"], paths["platlib"]]))}
    return subprocess.run(
        [sys.executable, "-S", str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def layer_names() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["id"] == "layers"]
    return {name.strip().strip("()") for layer in layers for name in layer.replace("|", ":").split(":")}


def test_the_import_contract_holds():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_every_top_level_module_is_in_a_layer():
    named = layer_names()
    found = {f"ragnarok.{p.stem}" for p in (ROOT / "ragnarok").glob("*.py") if p.stem != "__init__"}
    found |= {f"ragnarok.{p.parent.name}" for p in (ROOT / "ragnarok").glob("*/__init__.py")}
    missing = sorted(found - named)
    assert not missing, (
        f"{', '.join(missing)}: in no layer of [tool.importlinter] in pyproject.toml; name "
        "each in the layer it belongs to (a new command or notebook API: the entry points)"
    )
    assert {"api", "webui"} <= named


def copy_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("module", "line", "says"),
    [
        # a circle inside one layer: only the acyclic contract sees it (the streamed half imports the gateway)
        (
            "ragnarok/service/gateway.py",
            "from ragnarok.service.gateway_stream import stream_pipeline",
            "No cycles are allowed in ragnarok.service.\nIt could be made acyclic by removing 1 dependency:",
        ),
        # a stage importing what sits above it (the circle components -> llmcompress -> gateway -> components)
        (
            "ragnarok/stages/passage/llmcompress.py",
            "from ragnarok.service.gateway import StageError",
            "ragnarok.stages is not allowed to import ragnarok.service",
        ),
        # a stage importing a sibling it may not know (the encoder every stage shares, importing a generator)
        (
            "ragnarok/stages/embed/encoder.py",
            "from ragnarok.stages.generate.base import Guard",
            "ragnarok.stages.embed is not allowed to import ragnarok.stages.generate",
        ),
        # core importing a stage
        (
            "ragnarok/core/settings.py",
            "from ragnarok.stages.generate.base import Guard",
            "ragnarok.core is not allowed to import ragnarok.stages",
        ),
    ],
)
def test_an_import_against_the_flow_fails_the_check(tmp_path, module, line, says):
    tree = copy_tree(tmp_path)
    path = tree / module
    late = f"\n\ndef _late():\n    {line}  # noqa\n"  # inside a function: import-linter counts it too
    path.write_text(path.read_text(encoding="utf-8") + late, encoding="utf-8")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert says in result.stdout, result.stdout
