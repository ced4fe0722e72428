"""Run every chapter's Colab install cell in an environment built from Colab's published package list, then
every chapter.

    python -m scripts.colab_env [--python python3.13] [--only 00 11] [--out colab-env.json] [--keep]
    python -m scripts.colab_env --resolve      # the cheap check: pip's plan only, nothing downloaded but metadata

What a student's Colab GPU runtime has is Google's own list, copied to ``../shared/colab`` (``pip-freeze.gpu.txt``,
a dated snapshot; its README says which). The full check:

1. makes a virtual environment with the interpreter given (Python 3.13, Colab's) and installs there, at the
   snapshot's versions, what the book imports or the install could touch (``BASE``: torch, numpy, matplotlib,
   music21, IPython 7.34, ipykernel, ipywidgets 7, the Jupyter stack ...) with their dependencies, the whole
   snapshot as constraints. torch is PyPI's build of the snapshot's version (Colab's own, ``+cu128``, comes from
   PyTorch's index, which cannot be reached here): its CUDA libraries (``cuda-*``, ``nvidia-*``) are the ones
   PyPI's build asks for, not the snapshot's, and the record says which. Any other package the snapshot lacks
   (IPython 7.34's jedi: Colab goes without it) is uninstalled again, so that the cell meets what Colab has;
2. lists what is installed (``pip list --format=freeze``);
3. runs the chapters' install cell (the first code cell, the same in every chapter: checked) as the notebook has
   it, in the environment's own IPython kernel, with a stand-in ``google.colab`` module so that the cell takes
   its Colab branch. Two strings are replaced: the repository's URL by a ``file://`` URL of a temporary clone of
   this checkout whose ``main`` has the working tree committed (uncommitted edits count), and the constraints'
   URL by that clone's ``colab-constraints.txt``. Its apt-get line runs too (FluidSynth's library; a failure
   there, not being root say, is recorded, not fatal); its pip commands must succeed. Every shell command the
   cell ran is recorded with its exit status and seconds;
4. lists again: packages added are fine, a package that was there and changed version or went away fails the
   check; ``pip check`` may find nothing new;
5. runs every chapter in that environment's kernel (``scripts.run_chapters --profile smoke``, widgets live, so
   ipywidgets 7's widgets are built), and counts the widget views each executed chapter holds;
6. writes the record, ``colab-env.json``: the snapshot (date, commit, sha256), the constraints' sha256, the
   kernel's versions, the commands as run, ``added``, ``changed``, each chapter's result and widget views.

``--resolve`` is the cheap check that CI runs (``tests/book/test_constraints.py``): a throwaway environment whose
site-packages holds a stand-in ``.dist-info`` for every package of the snapshot (so pip takes them as installed,
nothing of torch downloaded), the cell's ``pip list`` as constraints with the constraints file, and pip's
``--dry-run --report``: it must add packages only. Exit status 1 when something failed, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import ROOT
from scripts.student_notebooks import repository

CHECK_VERSION = 2                         # the record's shape and what it means; test_constraints checks it
CONSTRAINTS = ROOT / "colab-constraints.txt"
SNAPSHOT = ROOT.parent / "shared" / "colab"
FREEZE = "pip-freeze.gpu.txt"
JSB = ROOT.parent / "shared" / "data" / "jsb" / "Jsb16thSeparated.json"
PIANO = ROOT.parent / "shared" / "data" / "piano"          # chapter 13's sample (Colab downloads MAESTRO instead)
PINS_LINE = re.compile(r"^(\s*)pins\s*=.*$", re.M)         # the constraints file's URL, however built
# installed before the cell, at the snapshot's versions: what the book imports or the install could touch
BASE = ["pip", "setuptools", "torch", "numpy", "matplotlib", "music21", "tqdm", "ipython", "ipykernel", "ipywidgets",
        "widgetsnbextension", "jupyterlab-widgets", "traitlets", "tornado", "pyzmq", "jupyter-client", "jupyter-core",
        "nbformat", "nbclient", "prompt-toolkit", "matplotlib-inline", "packaging", "pillow", "scipy", "pyyaml", "six"]
# torch's CUDA libraries: PyPI's torch build asks for its own, not the snapshot's (which go with Colab's +cu128)
TORCH_CUDA = re.compile(r"^(cuda-|nvidia-)")
NOT_FAKED = {"pip", "setuptools", "wheel"}     # --resolve: real in the throwaway environment (pip) or not needed
# the record's versions: the key packages after the cell
KEYS = ["torch", "numpy", "matplotlib", "music21", "tqdm", "ipython", "ipykernel", "ipywidgets",
        "widgetsnbextension", "jupyterlab-widgets", "traitlets", "tornado", "pyzmq", "jupyter-client", "jupyter-core",
        "nbclient", "nbformat", "prompt-toolkit", "pip", "setuptools", "musictx-lite", "pretty-midi", "mido",
        "verovio", "pyfluidsynth"]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# run in the kernel before the install cell: what makes `"google.colab" in sys.modules` true, and a log of every
# shell command (`!cmd`, %pip) with its exit status. The stand-in's enable_custom_widget_manager records calls.
STARTUP = r'''
import sys, time, types
_colab_calls, _colab_ran = [], []
_colab = types.ModuleType("google.colab")
_colab.output = types.SimpleNamespace(
    enable_custom_widget_manager=lambda: _colab_calls.append("output.enable_custom_widget_manager"))
sys.modules["google.colab"] = _colab
_colab_ip = get_ipython()
_colab_system = _colab_ip.system
def _colab_logged(cmd, *a, **k):
    t0 = time.time()
    _colab_ip.user_ns["_exit_code"] = None
    try:
        return _colab_system(cmd, *a, **k)
    finally:
        _colab_ran.append({"command": _colab_ip.var_expand(cmd, depth=1), "exit": _colab_ip.user_ns.get("_exit_code"),
                           "seconds": round(time.time() - t0, 1)})
_colab_ip.system = _colab_logged
'''
# run after it: what the kernel is, what ran, and a chord played (FluidSynth where apt installed its library)
REPORT = r'''
import json, sys, IPython, ipykernel, ipywidgets, numpy as _np, musictx_lite as _mtx
try:
    _c = _mtx.play(_np.array([[72, 67, 64, 48]] * 16), name="check")
    _sound = {"synth": _c.synth, "note": _c.note}
except Exception as e:
    _sound = {"error": f"{type(e).__name__}: {e}"}
print("COLAB-CHECK " + json.dumps({
    "ran": _colab_ran, "custom_widget_manager_calls": _colab_calls, "python": sys.version.split()[0],
    "executable": sys.executable, "ipython": IPython.__version__, "ipykernel": ipykernel.__version__,
    "ipywidgets": ipywidgets.__version__, "musictx_lite": _mtx.__file__, "sound": _sound}))
'''
# executes a notebook in a kernel of the environment that runs it (nbclient's python3 kernel)
DRIVE = r'''
import json, sys, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
src, dst, cwd, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
nb = nbformat.read(src, as_version=4)
error = None
try:
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": cwd}}).execute()
except CellExecutionError as e:
    error = f"{e.ename}: {e.evalue}"
except Exception as e:
    error = f"{type(e).__name__}: {e}"
nbformat.write(nb, dst)
print(json.dumps({"error": error and (error.strip().splitlines() or [""])[0]}))
'''


class CheckError(Exception):
    """A step of the check failed; its message is the record's and the one-line error's."""


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_python(name: str) -> str | None:
    """The interpreter ``name`` (on PATH, or pyenv's where PATH has only a shim that will not run it), as the
    real path of a Python that starts; None if there is none."""
    candidates = [shutil.which(name)]
    if os.sep not in name:
        root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        candidates += sorted(str(p) for p in root.glob(f"versions/*/bin/{name}"))
    for c in filter(None, candidates):
        try:
            out = subprocess.run([c, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                                 timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def read_freeze(text: str) -> dict[str, tuple[str, str | None, str]]:
    """A ``pip freeze`` / ``pip list --format=freeze`` text: canonical name -> (name, version, line). A direct
    reference (``name @ URL``) has the version its file name gives, else None."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not line:
            continue
        if " @ " in line:
            name, url = (s.strip() for s in line.split(" @ ", 1))
            stem = "[-_.]".join(map(re.escape, re.split(r"[-_.]+", name)))
            m = re.match(rf"{stem}-([0-9][^-]*?)(?:-|\.tar\.gz$|\.zip$)", url.split("#")[0].rsplit("/", 1)[-1], re.I)
            out[canon(name)] = (name, m.group(1) if m else None, line)
        elif "==" in line:
            name, version = (s.strip() for s in line.split("==", 1))
            out[canon(name)] = (name, version, line)
    return out


def snapshot_info(snapshot: Path) -> dict:
    """The snapshot's provenance, as its README states it: date, source commit; and the list's sha256."""
    readme = (snapshot / "README.md").read_text()
    commit = re.search(r"commit ([0-9a-f]{7,40})", readme)
    date = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", readme)
    return {"path": "../shared/colab/" + FREEZE, "source": "github.com/googlecolab/backend-info",
            "commit": commit and commit.group(1), "date": date and date.group(1),
            "sha256": sha256(snapshot / FREEZE)}


def pip_env(extra: dict | None = None) -> dict:
    """The environment for the venv's pip and kernels: this machine's pip settings (config files, find-links,
    extra indexes, a cap on torch) do not apply, as they do not on Colab; PyPI only."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env.update(extra or {})
    return env


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; raise CheckError with its last line of output when it fails."""
    out = subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)
    if out.returncode != 0:
        tail = [ln for ln in (out.stderr + "\n" + out.stdout).splitlines() if ln.strip()][-1:]
        raise CheckError(f"{' '.join(map(str, cmd))[:300]} failed with exit status {out.returncode}"
                         + (f": {tail[0].strip()}" if tail else ""))
    return out


def make_venv(python: str, venv: Path, snapshot: dict, env: dict) -> Path:
    """A virtual environment with the snapshot's pip."""
    run([python, "-m", "venv", venv])
    py = venv / "bin" / "python"
    pip = snapshot.get("pip")
    run([py, "-m", "pip", "install", "-q", f"pip=={pip[1]}" if pip else "pip"], env=env)
    return py


def installed(py: Path, env: dict) -> dict[str, str]:
    """``pip list --format=freeze`` of the environment: canonical name -> version."""
    text = run([py, "-m", "pip", "list", "--format=freeze"], env=env).stdout
    return {n: v for n, (_, v, _) in read_freeze(text).items()}


# ------------------------------------------------------------------------------------------------ the cheap check

def fake_site(py: Path, snapshot: dict) -> int:
    """Stand-in ``.dist-info`` folders (METADATA with name and version, INSTALLER, an empty RECORD) in the
    environment's site-packages, one per snapshot package with a version (pip, setuptools, wheel excepted)."""
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    n = 0
    for key, (name, version, _) in snapshot.items():
        if key in NOT_FAKED or version is None:
            continue
        d = site / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
        d.mkdir(exist_ok=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (d / "INSTALLER").write_text("pip\n")
        (d / "RECORD").write_text("")
        n += 1
    return n


def resolve(python: str, snapshot_dir: Path = SNAPSHOT, project: Path = ROOT, work: Path | None = None,
            timeout: float = 600) -> dict:
    """What the install cell's pip would do in the snapshot's runtime, without doing it: a throwaway environment
    whose site-packages holds a stand-in for every snapshot package, its ``pip list --format=freeze`` (as the cell
    takes it) and the constraints file as constraints, ``pip install --dry-run --report`` of ``project[audio]``.
    Returns the plan: ``install`` (name -> version), ``changed`` (snapshot packages it would reinstall: name ->
    [had, would install]), the command, and its seconds. Raises CheckError when pip fails."""
    t0 = time.time()
    snapshot = read_freeze((snapshot_dir / FREEZE).read_text())
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="musictx-resolve-")) if own else work
    try:
        env = pip_env()
        py = make_venv(python, work / "venv", snapshot, env)
        faked = fake_site(py, snapshot)
        has = work / "colab-has.txt"
        has.write_text(run([py, "-m", "pip", "list", "--format=freeze"], env=env).stdout)
        cmd = [py, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "-c", has,
               "-c", project / "colab-constraints.txt", f"{project}[audio]"]
        out = run(cmd, env=env, timeout=timeout)
        report = json.loads(out.stdout)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    install = {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}
    changed = {n: [snapshot[canon(n)][1], v] for n, v in install.items() if canon(n) in snapshot}
    return {"install": install, "changed": changed, "faked": faked, "seconds": round(time.time() - t0, 1),
            "command": " ".join(map(str, cmd[1:])).replace(str(work), "$WORK")}


# ------------------------------------------------------------------------------------------------- the full check

def install_cell() -> str:
    """The chapters' install cell: the first code cell, the same in every chapter (else CheckError)."""
    cells = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        cells[path.stem] = "".join(code[0]["source"]) if code else ""
    if not cells:
        raise CheckError("no chapter in notebooks/")
    first = next(iter(cells.values()))
    odd = [stem for stem, src in cells.items() if src != first]
    if odd:
        raise CheckError(f"the install cell differs from {next(iter(cells))}'s in {', '.join(odd)}")
    return first


def localise(cell: str, repo_url: str, pins: Path) -> str:
    """The cell with the repository's URL and the constraints' URL pointing at the local clone."""
    url = repository()[0]                                    # _config.yml's: the one place it is written
    if cell.count(f'"{url}"') != 1 or len(PINS_LINE.findall(cell)) != 1:
        raise CheckError(f'the install cell no longer has one "{url}" and one line that sets pins '
                         f'(the constraints URL): update scripts/colab_env.py')
    cell = cell.replace(f'"{url}"', json.dumps(repo_url))
    return PINS_LINE.sub(lambda m: f"{m.group(1)}pins = {json.dumps(str(pins))}", cell)


def clone_checkout(dest: Path) -> str:
    """A git clone of this checkout whose ``main`` has the working tree committed; its file:// URL."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           text=True)
    git = ["git", "-c", "user.name=colab-env", "-c", "user.email=colab-env@localhost", "-C", dest]
    if files.returncode == 0:
        run(["git", "clone", "-q", ROOT, dest])
        run(git + ["checkout", "-q", "-B", "main"])
        for p in run(["git", "ls-files", "-z"], cwd=dest).stdout.split("\0"):
            if p:
                (dest / p).unlink(missing_ok=True)
        names = [p for p in files.stdout.split("\0") if p]
    else:                                                    # a copy without its history
        dest.mkdir(parents=True)
        run(git + ["init", "-q", "-b", "main"])
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    for p in names:
        src = ROOT / p
        if src.is_file():
            (dest / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / p)
    run(git + ["add", "-A"])
    run(git + ["commit", "-q", "--allow-empty", "-m", "the working tree, for scripts.colab_env"])
    return dest.resolve().as_uri()


def notebook(cells: list[str]) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": src} for i, src in enumerate(cells)]}


def cell_text(cell: dict) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif o.get("output_type") == "error":
            parts.append(f"{o['ename']}: {o['evalue']}")
    return "".join(parts)


def widget_views(nb: dict) -> int:
    return sum(1 for c in nb.get("cells", []) for o in c.get("outputs", []) if WIDGET_MIME in o.get("data", {}))


def diff(before: dict[str, str], after: dict[str, str]) -> tuple[dict, dict]:
    """(added: name -> version, changed: name -> [before, after or None])."""
    added = {n: v for n, v in sorted(after.items()) if n not in before}
    changed = {n: [v, after.get(n)] for n, v in sorted(before.items()) if after.get(n) != v}
    return added, changed


def full_check(args, python: str, work: Path, log) -> dict:
    """Steps 1-5; returns the record (without its provenance), raising CheckError where it cannot go on."""
    timings, rec = {}, {}
    snapshot = read_freeze((args.snapshot / FREEZE).read_text())
    # 1. the environment: BASE at the snapshot's versions, the snapshot as constraints (torch's CUDA aside)
    t = time.time()
    venv = work / "venv"
    jupyter = venv / "share" / "jupyter"
    env = pip_env({"JUPYTER_PATH": str(jupyter), "VIRTUAL_ENV": str(venv),
                   "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
    py = make_venv(python, venv, snapshot, env)
    pins = work / "snapshot-constraints.txt"
    dropped = sorted(n for n, (_, v, _) in snapshot.items() if v is None or " @ " in snapshot[n][2])
    cuda = sorted(n for n in snapshot if TORCH_CUDA.match(n))
    pins.write_text("".join(f"{name}=={v.split('+')[0]}\n" for n, (name, v, line) in sorted(snapshot.items())
                            if n not in dropped and n not in cuda))
    base = [n for n in BASE if n in snapshot]
    want = [f"{n}=={snapshot[n][1].split('+')[0]}" for n in base]
    cmd = [py, "-m", "pip", "install", "-q", "-c", pins, *want]
    log(f"installing the snapshot's {', '.join(want)} and their dependencies ...")
    run(cmd, env=env)
    run([py, "-m", "ipykernel", "install", "--prefix", venv, "--name", "python3"], env=env)
    # what Colab's list lacks goes again (a dependency it does without: IPython 7.34's jedi), but torch's CUDA
    # libraries, which PyPI's torch needs; so that what the cell adds is what it would add on Colab
    extra = sorted(n for n in installed(py, env) if n not in snapshot and not TORCH_CUDA.match(n))
    if extra:
        run([py, "-m", "pip", "uninstall", "-y", "-q", *extra], env=env)
    timings["environment"] = round(time.time() - t, 1)
    before = installed(py, env)
    off = {n: [snapshot[n][1], v] for n, v in before.items()
           if n in snapshot and snapshot[n][1] and snapshot[n][1].split("+")[0] != v}
    rec["environment"] = {
        "python": run([py, "-c", "import platform; print(platform.python_version())"]).stdout.strip(),
        "installed": [f"{n}=={snapshot[n][1].split('+')[0]}" for n in base],
        "command": " ".join(map(str, cmd[1:])).replace(str(work), "$WORK"),
        "constraints": f"the snapshot, less its direct references ({', '.join(dropped)}) and torch's CUDA "
                       f"libraries ({len(cuda)}: cuda-*, nvidia-*), local version labels dropped",
        "not_in_snapshot": {n: v for n, v in before.items() if n not in snapshot},
        "removed_not_in_snapshot": extra,
        "off_snapshot": off,
        "pip_config": "none: PIP_CONFIG_FILE=/dev/null, this machine's PIP_* settings unset (PyPI only)"}
    bad = {n: v for n, v in off.items() if not TORCH_CUDA.match(n)}
    if bad:
        raise CheckError(f"the environment is off the snapshot: {bad}")
    log(f"environment: {len(before)} packages in {timings['environment']:.0f} s; torch's CUDA libraries as PyPI's "
        f"build asks ({len(rec['environment']['not_in_snapshot'])} the snapshot lacks, {len(off)} at other "
        f"versions); removed again, as Colab lacks them: {', '.join(extra) or 'none'}")
    check_before = subprocess.run([py, "-m", "pip", "check"], capture_output=True, text=True, env=env)

    # 2-3. the install cell, in the environment's kernel, pointed at a clone of this checkout
    t = time.time()
    url = clone_checkout(work / "musictx-lite")
    original = install_cell()
    cell = localise(original, url, work / "musictx-lite" / "colab-constraints.txt")
    (work / "install.ipynb").write_text(json.dumps(notebook([STARTUP, cell, REPORT])))
    drive = run([py, "-c", DRIVE, work / "install.ipynb", work / "install.out.ipynb", work, 1800],
                env=env, cwd=work)
    timings["install_cell"] = round(time.time() - t, 1)
    ran_nb = json.loads((work / "install.out.ipynb").read_text())
    error = json.loads(drive.stdout.strip().splitlines()[-1])["error"]
    report = next((json.loads(ln.split(" ", 1)[1]) for ln in cell_text(ran_nb["cells"][2]).splitlines()
                   if ln.startswith("COLAB-CHECK ")), None)
    rec["install_cell"] = {"sha256": hashlib.sha256(original.encode()).hexdigest(),
                           "replaced": {repository()[0]:
                                        "file:// URL of a clone of the checkout, main = the working tree",
                                        "pins = f\"https://raw.githubusercontent.com/...\"": "that clone's file"},
                           "output": cell_text(ran_nb["cells"][1]).replace(str(work), "$WORK").strip(),
                           "error": error}
    if report is None:
        raise CheckError(f"the install cell did not run through: {error}")
    ran = [{**r, "command": r["command"].replace(str(work), "$WORK")}
           for r in report.pop("ran")]
    rec["install_cell"]["ran"] = ran
    rec["kernel"] = report
    rec["kernel"]["musictx_lite"] = report["musictx_lite"].replace(str(work), "$WORK")
    for r in ran:
        log(f"  {r['seconds']:6.1f} s  exit {r['exit']}  {r['command'][:150]}")
    apt = [r for r in ran if r["command"].lstrip().startswith("apt-get")]
    apt_failed = [r for r in apt if r["exit"] != 0]
    rec["install_cell"]["apt"] = (
        "not in the cell" if not apt else "ran" if not apt_failed else
        f"failed (exit {apt_failed[0]['exit']}{'' if os.geteuid() == 0 else ', not root'}): FluidSynth's library "
        f"may be missing, then the organ plays")
    failed = [r for r in ran if r not in apt and r["exit"] != 0]
    if error or failed or len([r for r in ran if " pip " in r["command"]]) < 2:
        raise CheckError(f"the install cell failed: {error or failed or 'its pip list and pip install did not run'}")

    # 4. nothing there before changed
    after = installed(py, env)
    rec["added"], rec["changed"] = diff(before, after)
    rec["versions"] = {k: after.get(k) for k in KEYS}
    check_after = subprocess.run([py, "-m", "pip", "check"], capture_output=True, text=True, env=env)
    old = set(check_before.stdout.splitlines())
    rec["pip_check"] = {"before": check_before.stdout.strip(), "after": check_after.stdout.strip(),
                        "new": [ln for ln in check_after.stdout.splitlines()
                                if ln not in old and "No broken" not in ln]}
    log(f"install cell: {timings['install_cell']:.0f} s; added {rec['added']}; changed {rec['changed'] or 'nothing'}; "
        f"pip check: {check_after.stdout.strip()}")

    # 5. every chapter in that environment's kernel
    t = time.time()
    out = work / "chapters"
    help_text = run([py, "-m", "scripts.run_chapters", "--help"], env=env, cwd=ROOT).stdout
    cmd = [py, "-m", "scripts.run_chapters", "--profile", "smoke", "--out", out,
           *(["--workers", "2"] if "--workers" in help_text else []), *(["--only", *args.only] if args.only else [])]
    data = {"MUSICTX_JSB_PATH": str(JSB) if JSB.exists() else None,
            "MUSICTX_PIANO_PATH": str(PIANO) if (PIANO / "pairs.csv").exists() else None}
    chapter_env = {**env, "MUSICTX_WIDGETS": "live", **{k: v for k, v in data.items() if v}}
    log(f"running the chapters: {' '.join(map(str, cmd[1:]))}")
    runner = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=chapter_env)
    timings["chapters"] = round(time.time() - t, 1)
    summary = json.loads((out / "chapters.json").read_text())
    rows = []
    for row in summary["chapters"]:
        path = out / f"{row['chapter']}.ipynb"
        nb = json.loads(path.read_text()) if path.exists() else {}
        kernel_python = nb.get("metadata", {}).get("language_info", {}).get("version")
        rows.append({k: row.get(k) for k in ("chapter", "seconds", "ok", "error")}
                    | {"widget_views": widget_views(nb), "kernel_python": kernel_python})
    rec["runner"] = {"command": " ".join(map(str, cmd[1:])).replace(str(work), "$WORK"), "exit": runner.returncode,
                     "python": summary.get("python"), "device": summary.get("device"),
                     "env": {"MUSICTX_WIDGETS": "live", **data,
                             "JUPYTER_PATH": "$WORK/venv/share/jupyter (the environment's python3 kernel)"}}
    rec["chapters"] = rows
    rec["widget_views"] = {r["chapter"]: r["widget_views"] for r in rows}
    rec["timings_seconds"] = timings
    return rec


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default="python3.13", help="the interpreter (default python3.13, Colab's)")
    ap.add_argument("--snapshot", type=Path, default=SNAPSHOT, help=argparse.SUPPRESS)
    ap.add_argument("--only", nargs="*", default=None, help="chapter numbers, e.g. 00 11 (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "colab-env.json", help="the record (JSON)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (environment, executed chapters)")
    ap.add_argument("--resolve", action="store_true", help="the cheap check: pip's plan against the snapshot")
    args = ap.parse_args(argv)
    python = find_python(args.python)
    if python is None:
        print(f"error: no interpreter {args.python!r} on this machine", file=sys.stderr)
        return 2
    if not (args.snapshot / FREEZE).is_file():
        print(f"error: no Colab snapshot at {args.snapshot / FREEZE}", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(f"[{time.time() - t0:6.0f} s] {msg}", flush=True)

    t0 = time.time()
    if args.resolve:
        try:
            plan = resolve(python, args.snapshot)
        except CheckError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"pip would add {', '.join(f'{n} {v}' for n, v in plan['install'].items())} "
              f"({plan['seconds']:.0f} s)")
        if plan["changed"]:
            print(f"error: the install would change what Colab has: {plan['changed']}", file=sys.stderr)
        return 1 if plan["changed"] else 0

    from musictx_lite.study.hub import git_commit

    commit = git_commit()
    work = Path(tempfile.mkdtemp(prefix="musictx-colab-"))
    log(f"{python}; work folder {work}")
    rec, error = {}, None
    try:
        rec = full_check(args, python, work, log)
    except (CheckError, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
        error = str(e).splitlines()[0] if str(e) else type(e).__name__
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    seconds = round(time.time() - t0)
    chapters = rec.get("chapters", [])
    kernel = rec.get("kernel", {})
    problems = ([error] if error else []) + [
        f"{n} changed: {v[0]} -> {v[1]}" for n, v in rec.get("changed", {}).items()] + [
        f"pip check: {ln}" for ln in rec.get("pip_check", {}).get("new", [])] + [
        f"{r['chapter']}: {r['error']}" for r in chapters if not r["ok"]] + [
        f"{r['chapter']} ran on Python {r['kernel_python']}, not {kernel.get('python')}"
        for r in chapters if r["kernel_python"] != kernel.get("python")]
    if chapters and not sum(r["widget_views"] for r in chapters):
        problems.append("no chapter shows a widget")
    if kernel.get("custom_widget_manager_calls") and kernel.get("ipywidgets", "8").split(".")[0] < "8":
        problems.append("enable_colab() turned on the custom widget manager for ipywidgets 7")
    record = {"check_version": CHECK_VERSION,
              "command": " ".join(["python -m scripts.colab_env", *argv]),
              "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "snapshot": snapshot_info(args.snapshot),
              "constraints_sha256": sha256(CONSTRAINTS),
              "python": kernel.get("python"),
              "ok": not problems, "problems": problems,
              "seconds": seconds,
              **rec}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    ok = len(chapters) - sum(1 for r in chapters if not r["ok"])
    timings = ", ".join(f"{k} {v:.0f} s" for k, v in rec.get("timings_seconds", {}).items())
    log(f"Python {record['python']}: {seconds} s in all ({timings}); "
        f"added {len(rec.get('added', {}))}, changed {len(rec.get('changed', {}))}; {ok} of {len(chapters)} chapters "
        f"ran, {sum(r['widget_views'] for r in chapters)} widget views; wrote {args.out}")
    if problems:
        print(f"error: {'; '.join(problems)}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
