"""local/_venv.sh: one .venv for ./local/run and ./local/test, installed again only when needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the venv's python: records each pip call instead of installing.
FAKE_PYTHON = '#!/bin/sh\necho "$@" >> "$(dirname "$0")/../../pip.log"\n'


def _project(tmp_path: Path) -> Path:
    (tmp_path / "local").mkdir()
    shutil.copy(ROOT / "local" / "_venv.sh", tmp_path / "local" / "_venv.sh")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "postbag"\n')
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def _venv(project: Path, extras: str) -> None:
    subprocess.run(
        ["bash", "-c", f"source local/_venv.sh && postbag_venv '{extras}'"],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=30,
    )


def _installs(project: Path) -> list[str]:
    log = project / "pip.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" -e ", 1)[1].split()[0] for line in lines]


def test_venv__alternating_run_and_test_installs_once_per_extra_set(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for extras in ("local", "dev", "local", "dev", "local"):
        _venv(project, extras)
    assert _installs(project) == [".[local]", ".[dev,local]"]


def test_venv__an_edited_pyproject_installs_again_keeping_the_extras(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _venv(project, "dev")
    _venv(project, "local")
    with (project / "pyproject.toml").open("a") as toml:
        toml.write('description = "changed"\n')
    _venv(project, "local")
    _venv(project, "dev")
    assert _installs(project) == [".[dev]", ".[dev,local]", ".[dev,local]"]
