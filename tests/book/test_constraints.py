"""colab-constraints.txt: the versions of the package's dependencies known to work together, applied by every
chapter's Colab install cell, leaving Colab's torch and numpy alone."""
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def constraints() -> dict[str, SpecifierSet]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "colab-constraints.txt").read_text().splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln]
    return {r.name.lower().replace("_", "-"): r.specifier for r in reqs}


def dependencies() -> dict[str, SpecifierSet]:
    """The installed package's requirements (pyproject.toml's), with the ``audio`` extra (FluidSynth's binding)."""
    reqs = [Requirement(r) for r in metadata.requires("musictx-lite")]
    keep = [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": "audio"})]
    return {r.name.lower().replace("_", "-"): r.specifier for r in keep}


def bounds(spec: SpecifierSet) -> tuple[str | None, str | None]:
    lo = [s.version for s in spec if s.operator == ">="]
    hi = [s.version for s in spec if s.operator == "<"]
    return (lo[0] if lo else None), (hi[0] if hi else None)


def test_every_dependency_but_torch_and_numpy_is_bounded_inside_the_packages_own_range():
    from packaging.version import Version

    pins, deps = constraints(), dependencies()
    assert "torch" not in pins and "numpy" not in pins              # Colab's stay as they are
    assert set(deps) - {"torch", "numpy"} <= set(pins)
    for name, spec in pins.items():
        lo, hi = bounds(spec)
        assert lo and hi, f"{name}: give both bounds"
        assert Version(lo) < Version(hi), name
        if name in deps:                                            # never outside what pyproject allows
            dlo, dhi = bounds(deps[name])
            assert Version(lo) >= Version(dlo) and Version(hi) <= Version(dhi), name


def test_the_environment_the_tests_run_in_is_inside_the_constraints():
    """What CI tests is what the constraints allow: each installed dependency's version satisfies them."""
    checked = 0
    for name, spec in constraints().items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            assert name == "pyfluidsynth", f"{name} is a dependency but is not installed"
            continue
        assert spec.contains(version, prereleases=True), f"{name} {version} is outside {spec}"
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_install_cell_applies_the_constraints_of_its_release(path):
    import musictx_lite

    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    owner_repo = url.removeprefix("https://github.com/")
    first = "".join(next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")["source"])
    colab = first.split("else:")[0]
    pins = f'pins = "https://raw.githubusercontent.com/{owner_repo}/v{musictx_lite.__version__}"'
    assert pins in colab
    assert "!curl -fsSL {pins}/colab-constraints.txt -o /tmp/pins.txt || touch /tmp/pins.txt" in colab
    # a release without the file installs unpinned, and says so
    assert 'if not open("/tmp/pins.txt").read().strip():' in colab and "versions not pinned" in colab
    # the constraints apply to every pip install after them: FluidSynth's binding and the package
    lines = colab.splitlines()
    at = lines.index("    %env PIP_CONSTRAINT=/tmp/pins.txt")
    assert all(i > at for i, ln in enumerate(lines) if "%pip install" in ln)


def test_the_constraints_resolve_for_python_3_12():
    """Colab's Python: pip finds wheels for 3.12 of every constrained dependency, at versions inside the
    constraints (a dry run for the 3.12 interpreter and a Linux x86-64 platform, nothing installed)."""
    names = sorted(constraints())
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")
                 for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", *platforms, "--target", "/tmp/musictx-pip312",
           "--quiet", "--report", "-", "-c", str(ROOT / "colab-constraints.txt"), *names]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0 and re.search(r"(?i)connection|network is unreachable|temporary failure", out.stderr):
        pytest.skip("the package index cannot be reached from here")
    assert out.returncode == 0, out.stderr[-2000:]
    chosen = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
              for i in json.loads(out.stdout)["install"]}
    for name, spec in constraints().items():
        assert spec.contains(chosen[name], prereleases=True), (name, chosen[name])


def test_a_fresh_python_3_12_environment_with_todays_constraints_ran_every_chapter():
    """colab-env.json, written by ``python -m scripts.colab_env --python python3.12``: a fresh environment set up
    as the Colab cell sets one up (Colab's torch and numpy, then the constrained install) passed ``pip check``
    and ran every chapter. The record must be of today's constraints file: change the file, run the tool again."""
    import hashlib

    rec = json.loads((ROOT / "colab-env.json").read_text())
    sha = hashlib.sha256((ROOT / "colab-constraints.txt").read_bytes()).hexdigest()
    assert rec["constraints_sha256"] == sha, (
        "colab-constraints.txt changed after colab-env.json was written: "
        "run python -m scripts.colab_env --python python3.12")
    assert rec["python"].startswith("3.12.") and rec["pip_check_ok"], (rec["python"], rec["pip_check"])
    for name, spec in constraints().items():                     # what the constraints let pip choose
        assert rec["versions"][name] and spec.contains(rec["versions"][name], prereleases=True), name
    assert rec["versions"]["torch"] and rec["versions"]["numpy"] and rec["versions"]["musictx-lite"]
    assert sorted(r["chapter"] for r in rec["chapters"]) == [p.stem for p in NOTEBOOKS]
    assert all(r["ok"] for r in rec["chapters"]), [r for r in rec["chapters"] if not r["ok"]]


def test_colab_env_says_in_one_line_when_the_interpreter_is_missing(capsys):
    from scripts import colab_env

    assert colab_env.main(["--python", "python-that-is-not-here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no interpreter 'python-that-is-not-here'") and "\n" not in err
