"""Real installs: the wheel and sdist carry the licence and the shipped rules, and a ``pip install --user``
(the usual scheme on shared GPU machines) finds the rules from wherever the package landed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _source_copy(dest: Path) -> Path:
    """What a fresh clone holds (tracked and new, not ignored files), without this checkout's build litter."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split("\n")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file() and name.startswith(("gpuwatch/", "pyproject.toml", "README.md", "LICENSE")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(wheel, sdist)`` built from a clean copy of the source, offline, with this environment's setuptools."""
    root = tmp_path_factory.mktemp("install")
    src = _source_copy(root / "src")
    out = root / "dist"
    code = "import sys; from setuptools import build_meta as b; d = sys.argv[1]; b.build_wheel(d); b.build_sdist(d)"
    subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, check=True, capture_output=True)
    return next(out.glob("*.whl")), next(out.glob("*.tar.gz"))


def test_wheel_and_sdist_carry_the_licence_and_the_shipped_rules(built: tuple[Path, Path]) -> None:
    wheel, sdist = built
    in_wheel = zipfile.ZipFile(wheel).namelist()
    assert "gpuwatch/data/alerts/default.yml" in in_wheel
    assert "gpuwatch/data/h200-incident.ndjson.gz" in in_wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in in_wheel), in_wheel[-8:]
    metadata = zipfile.ZipFile(wheel).read(next(n for n in in_wheel if n.endswith(".dist-info/METADATA")))
    assert b"License-Expression: Apache-2.0" in metadata
    with tarfile.open(sdist) as tar:
        in_sdist = {Path(n).relative_to(Path(n).parts[0]).as_posix() for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "gpuwatch/data/alerts/default.yml"} <= in_sdist
    assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")[:200]


def test_user_scheme_install_finds_the_shipped_rules(built: tuple[Path, Path], tmp_path: Path) -> None:
    """``pip install --user`` into a temporary user base, run by the base interpreter (a venv hides the user
    site); the dependencies come from this environment's site-packages, gpuwatch only from the user base."""
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    if not base_python.exists() or subprocess.run([base_python, "-m", "pip", "--version"],
                                                  capture_output=True).returncode != 0:
        pytest.skip("the base interpreter has no pip")
    env = {**os.environ, "PYTHONUSERBASE": str(tmp_path / "userbase"), "PIP_NO_INDEX": "1"}
    env.pop("PYTHONNOUSERSITE", None)
    subprocess.run([base_python, "-m", "pip", "install", "-q", "--user", "--no-deps", str(built[0])], env=env,
                   check=True, capture_output=True)
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    env["PYTHONPATH"] = site_packages  # the dependencies; gpuwatch itself is an editable install, not seen here
    run = lambda *args: subprocess.run([base_python, "-m", "gpuwatch", *args], env=env, cwd=tmp_path,  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    where = subprocess.run([base_python, "-c", "import gpuwatch; print(gpuwatch.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "userbase")), where
    check = run("rules", "check")
    assert check.returncode == 0 and check.stdout.startswith("OK: "), check.stderr
    assert not check.stdout.startswith("OK: 0 ")
    config = run("daemon", "--check-config")
    assert config.returncode == 0 and " 0 rule(s)" not in config.stdout, config.stdout + config.stderr
