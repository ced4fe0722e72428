"""colab-constraints.txt and the chapters' Colab install cell: installing into Colab adds what Colab lacks and changes
nothing it has. What Colab has is Google's published list of a GPU runtime, ../shared/colab (a dated snapshot).

The install cell passes the runtime's own ``pip list`` and the constraints to its one ``pip install`` (``-c`` twice);
the tests here check the cell's form, that the snapshot's versions lie inside pyproject's ranges and the constraints,
that pip's plan against the snapshot adds packages only (cheap: a dry run, every run), and that colab-env.json, the
record of ``python -m scripts.colab_env`` (the cell run for real in an environment built from the snapshot, then
every chapter), is of today's constraints, cell and snapshot, and passed."""
import hashlib
import json
import re
import shlex
import socket
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SNAPSHOT = ROOT.parent / "shared" / "colab"
needs_snapshot = pytest.mark.skipif(not (SNAPSHOT / "pip-freeze.gpu.txt").is_file(),
                                    reason="no Colab snapshot at ../shared/colab")


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def constraints() -> dict[str, SpecifierSet]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "colab-constraints.txt").read_text().splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln]
    return {canon(r.name): r.specifier for r in reqs}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def dependencies() -> dict[str, SpecifierSet]:
    """pyproject.toml's requirements of the package, with the ``audio`` extra (FluidSynth's binding): what the
    install cell installs."""
    project = pyproject()["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["audio"]]
    return {canon(r.name): r.specifier for r in reqs if r.marker is None or r.marker.evaluate({"extra": "audio"})}


def snapshot() -> dict[str, str]:
    """The snapshot's packages with a version (``name==version``; direct references left out): name -> version,
    local labels (``+cu128``) dropped."""
    out = {}
    for line in (SNAPSHOT / "pip-freeze.gpu.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            out[canon(name)] = version.strip().split("+")[0]
    return out


def bounds(spec: SpecifierSet) -> tuple[str | None, str | None]:
    lo = [s.version for s in spec if s.operator == ">="]
    hi = [s.version for s in spec if s.operator == "<"]
    return (lo[0] if lo else None), (hi[0] if hi else None)


def install_cell(path: Path) -> str:
    return "".join(next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")["source"])


def colab_branch(cell: str) -> list[str]:
    """The lines the cell runs on Colab: those under ``if "google.colab" in sys.modules:``, up to its ``else:``."""
    lines = cell.splitlines()
    start = lines.index('if "google.colab" in sys.modules:') + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("else"))
    return [ln.strip() for ln in lines[start:end] if ln.strip() and not ln.strip().startswith("#")]


def test_every_dependency_but_torch_and_numpy_is_bounded_inside_the_packages_own_range():
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
def test_the_install_cell_holds_its_one_pip_install_to_the_runtimes_own_versions(path):
    """On Colab the cell lists what the runtime has (pip list --format=freeze), then passes that list and the
    constraints to its one pip install (-c twice, this install only: no PIP_CONSTRAINT, which would outlive it);
    the constraints and the package come from the book's repository (_config.yml) at the ref the Colab button opens
    (its repository.branch)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    url, branch = config["url"].rstrip("/"), config["branch"]
    cell = install_cell(path)
    assert "PIP_CONSTRAINT" not in cell
    colab = colab_branch(cell)
    has = [i for i, ln in enumerate(colab) if re.fullmatch(r"!\{sys\.executable\} -m pip list --format=freeze "
                                                           r"> /tmp/colab-has\.txt", ln)]
    installs = [i for i, ln in enumerate(colab) if re.match(r"[%!].*\bpip\b.*\binstall\b", ln)]
    assert len(has) == 1 and len(installs) == 1 and has[0] < installs[0], colab
    assert all("%pip install" not in ln for ln in cell.splitlines() if ln.strip() not in colab)
    # the values the cell computes: its plain assignments, run
    ns: dict = {}
    for ln in colab:
        if re.match(r"[A-Za-z_][\w, ]*=[^=]", ln):
            exec(ln, {}, ns)
    assert ns["ref"] == branch, (ns["ref"], branch)
    owner_repo = url.removeprefix("https://github.com/")
    assert ns["pins"] == f"https://raw.githubusercontent.com/{owner_repo}/{branch}/colab-constraints.txt"
    line = re.sub(r"\{(\w+)\}", lambda m: str(ns[m.group(1)]), colab[installs[0]])
    args = shlex.split(line)
    assert args[:2] == ["%pip", "install"], line
    cs = [args[i + 1] for i, a in enumerate(args) if a == "-c"]
    assert cs == ["/tmp/colab-has.txt", ns["pins"]], line
    wanted = [a for i, a in enumerate(args[2:], 2) if not a.startswith("-") and args[i - 1] != "-c"]
    # the package, and the book's solutions for the chapter's solution cells (a student notebook installs the
    # package alone: tests/classroom/test_no_solutions.py)
    assert wanted == [f"musictx-lite[audio] @ git+{url}@{branch}",
                      f"musictx-solutions @ git+{url}@{branch}#subdirectory=book/solutions"], line


@needs_snapshot
def test_what_colab_has_is_inside_pyprojects_ranges_and_the_constraints():
    """Each package of the constraints and each dependency of the package that Colab has, at Colab's version, is
    allowed by both: so the install never needs to change it. And Colab's Python is one the package supports."""
    have, deps, pins = snapshot(), dependencies(), constraints()
    names = sorted((set(pins) | set(deps)) & set(have))
    assert {"torch", "numpy", "matplotlib", "ipython", "ipywidgets", "music21", "tqdm"} <= set(names)
    for name in names:
        if name in deps:
            assert deps[name].contains(have[name], prereleases=True), f"pyproject: {name} {deps[name]} " \
                                                                       f"excludes Colab's {have[name]}"
        if name in pins:
            assert pins[name].contains(have[name], prereleases=True), f"constraints: {name} {pins[name]} " \
                                                                       f"excludes Colab's {have[name]}"
    python = re.search(r"^Python (\d+\.\d+\.\d+)", (SNAPSHOT / "os-info-gpu.txt").read_text(), re.M).group(1)
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(python), python


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def python313():
    from scripts import colab_env

    if not pypi_reachable():
        pytest.skip("PyPI cannot be reached from here")
    return colab_env.find_python("python3.13") or sys.executable


@needs_snapshot
def test_the_install_against_colabs_versions_adds_packages_and_changes_none(python313):
    """pip's plan for the cell's install (``-c`` the runtime's pip list, ``-c`` the constraints, the package with its
    audio extra) in an environment that holds every snapshot package (stand-ins: nothing downloaded): additions
    only, the package and what Colab lacks among them."""
    from scripts import colab_env

    plan = colab_env.resolve(python313, SNAPSHOT, ROOT)
    have = snapshot()
    added = {canon(n) for n in plan["install"]}
    assert plan["changed"] == {} and not added & set(have), plan
    assert {"musictx-lite", "verovio", "pretty-midi", "pyfluidsynth"} <= added, plan
    assert plan["faked"] > 600


@needs_snapshot
def test_the_resolution_check_fails_when_the_package_needs_what_colab_has_at_another_version(python313, tmp_path):
    """The check above can fail: a package that needs a newer matplotlib than Colab's cannot install without
    changing it, and pip, held to the runtime's list, says so."""
    from scripts import colab_env

    have = snapshot()["matplotlib"]
    newer = f"{Version(have).major}.{Version(have).minor + 1}"
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "musictx-lite"\nversion = "0.0.1"\ndependencies = ["matplotlib>={newer}"]\n'
        '[project.optional-dependencies]\naudio = []\n[tool.setuptools]\npy-modules = []\n')
    (tmp_path / "colab-constraints.txt").write_text("")
    with pytest.raises(colab_env.CheckError, match="ResolutionImpossible"):
        colab_env.resolve(python313, SNAPSHOT, tmp_path)


def test_colab_env_json_is_todays_check_of_todays_cell_constraints_and_snapshot_and_passed():
    """colab-env.json, written by ``python -m scripts.colab_env``: an environment built from the snapshot (Python
    3.13, IPython 7.34, ipywidgets 7.7.1 ...), the install cell run there for real, nothing it had changed, every
    chapter run in its kernel with live widgets. Change the constraints, the install cell or the snapshot: run the
    check again (it takes about half an hour)."""
    from scripts import colab_env

    rec = json.loads((ROOT / "colab-env.json").read_text())
    again = "run python -m scripts.colab_env"
    assert rec.get("check_version") == colab_env.CHECK_VERSION, f"an older check wrote colab-env.json: {again}"
    assert rec["command"].split()[:3] == ["python", "-m", "scripts.colab_env"] and "--only" not in rec["command"]
    assert rec["constraints_sha256"] == hashlib.sha256((ROOT / "colab-constraints.txt").read_bytes()).hexdigest(), (
        f"colab-constraints.txt changed after colab-env.json was written: {again}")
    cell = install_cell(NOTEBOOKS[0])
    assert rec["install_cell"]["sha256"] == hashlib.sha256(cell.encode()).hexdigest(), (
        f"the install cell changed after colab-env.json was written: {again}")
    assert rec["ok"] and rec["problems"] == [], rec["problems"]
    assert rec["python"].startswith("3.13.") and rec["kernel"]["python"] == rec["python"]
    assert rec["changed"] == {} and rec["pip_check"]["new"] == []
    assert {"musictx-lite", "verovio", "pretty-midi", "pyfluidsynth"} <= set(rec["added"])
    assert rec["kernel"]["custom_widget_manager_calls"] == []          # ipywidgets 7: Colab draws them natively
    for name, spec in constraints().items():                           # what the constraints let pip choose
        assert rec["versions"][name] and spec.contains(rec["versions"][name], prereleases=True), name
    assert all(r["exit"] == 0 for r in rec["install_cell"]["ran"] if "pip" in r["command"])
    assert sorted(r["chapter"] for r in rec["chapters"]) == [p.stem for p in NOTEBOOKS]
    assert all(r["ok"] for r in rec["chapters"]), [r for r in rec["chapters"] if not r["ok"]]
    assert all(r["kernel_python"] == rec["python"] for r in rec["chapters"])
    assert sum(r["widget_views"] for r in rec["chapters"]) > 0
    if (SNAPSHOT / "pip-freeze.gpu.txt").is_file():                   # of today's snapshot, at its versions
        assert rec["snapshot"] == colab_env.snapshot_info(SNAPSHOT), f"the snapshot changed: {again}"
        have = snapshot()
        for name in ("ipython", "ipykernel", "ipywidgets"):
            assert rec["kernel"][name] == have[name] == rec["versions"][name], name
        for name in ("torch", "numpy", "matplotlib", "music21", "traitlets", "tornado", "pyzmq", "jupyter-client"):
            assert rec["versions"][name] == have[name], name
        assert not set(rec["added"]) & set(have)


def test_colab_env_says_in_one_line_when_the_interpreter_is_missing(capsys):
    from scripts import colab_env

    assert colab_env.main(["--python", "python-that-is-not-here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no interpreter 'python-that-is-not-here'") and "\n" not in err
