"""What a student installs holds no reference solution: the musictx-lite wheel, built from the repository as a
chapter's Colab install cell builds it (pip, with build isolation), installed alone into a fresh environment,
neither imports nor contains the book's solutions (``book/solutions``), while every checker still works there."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = range(14)


def reference_names() -> dict[str, str]:
    """{name: chapter module} of every function and class the book's solutions define for an exercise, except the
    ``exercise_N_M`` runners and ``expected``, which run them."""
    import importlib

    out = {}
    for n in CHAPTERS:
        module = importlib.import_module(f"musictx_solutions.ch{n}")
        for name, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__ \
                    and not name.startswith("exercise_") and name != "expected":
                out[name] = module.__name__
    return out


def defined_names(source: str) -> set[str]:
    """The functions and classes a Python source defines, at any depth."""
    tree = ast.parse(source)
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, timeout=300)
    (path,) = out.glob("musictx_lite-*.whl")
    return path


def test_the_wheel_holds_no_solution_module_and_defines_no_reference(wheel):
    refs = reference_names()
    assert {"RMSNorm", "cross_attention", "mha_einsum", "sustain"} <= refs.keys(), "the solutions were not found"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert not [n for n in names if "musictx_solutions" in n or "/exercises/" in n], names
        assert "musictx_lite/classroom/checkers.py" in names and "musictx_lite/classroom/checks/expected.json" in names
        clash = {}
        for n in names:
            if n.endswith(".py"):
                src = z.read(n).decode()
                for name in defined_names(src) & refs.keys():
                    body = inspect.getsource(getattr(sys.modules[refs[name]], name))
                    if body in src:
                        clash[name] = n
                # the reference code itself, pasted under another name
                for name, module in refs.items():
                    lines = [ln.strip() for ln in inspect.getsource(getattr(sys.modules[module], name)).splitlines()
                             if len(ln.strip()) > 40 and not ln.strip().startswith(('"""', "#", "def ", "class "))]
                    if len(lines) >= 3 and all(ln in src for ln in lines):
                        clash[name] = n
    assert not clash, f"reference solutions found in the wheel: {clash}"


def test_in_a_fresh_environment_the_checkers_work_and_no_solution_imports(wheel, tmp_path):
    """The wheel alone in a new virtual environment (its dependencies read from this one's site-packages as a
    plain path, so that no editable install of this checkout is seen)."""
    env = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)                                          # what pip install --no-deps does with it
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")   # a path only: its .pth files stay unread
    probe = """
import importlib, importlib.util, sys
import musictx_lite
assert musictx_lite.__file__.startswith(sys.argv[1]), musictx_lite.__file__
from musictx_lite.classroom.checkers import CHECKERS
import torch.nn as nn
assert len(CHECKERS) >= 20
for missing in ("musictx_solutions", "musictx_lite.classroom.exercises"):
    try:
        importlib.import_module(missing)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{missing} imports")
ok = CHECKERS["3.2"](lambda weights: weights)                # a wrong answer fails, and says so
print("checked", len(CHECKERS), ok)
"""
    out = subprocess.run([str(env / "bin" / "python"), "-c", probe, str(site)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("False"), out.stdout


def test_no_student_notebook_imports_a_solution():
    for path in sorted((ROOT / "notebooks" / "students").glob("*.ipynb")):
        text = path.read_text()
        assert "musictx_solutions" not in text and "classroom.exercises" not in text, path.name
        assert "musictx-solutions" not in text and "{sol}" not in text, f"{path.name} installs the solutions"
        assert '%pip install -q -c /tmp/colab-has.txt -c {pins} \\"{pkg}\\"' in text, path.name
