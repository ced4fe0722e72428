"""The package's layers: every module sits in one, no import points upward, and no imports form a cycle.

Read from the source with ``ast``, so imports inside functions count too. A new
module must be given its layer here; the README's layout section describes them.
"""
import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "musictx_lite"

LAYERS = {
    # 0: utilities, which every layer may use: settings (every MUSICTX_* variable), the version,
    #    devices, writing files atomically, the checkpoint format
    "utilities": ["settings", "version", "device", "files", "checkpoint"],
    # 1: input and output: data sets, tokens, MIDI, audio, scores, statistics of music
    "io": ["io"],
    # 2: the model: its configuration, its parts, the decoder, what it is scored on, the causality probes, the registry
    "model": ["models"],
    # 3: the engine: the training loop and its callbacks, precision, several processes, distillation,
    #    sampling, and the settings of a run (profiles)
    "engine": ["engine"],
    # 4: the study: baselines, the comparison, benchmarks, the reproduction of the paper, the shipped models
    "study": ["study"],
    # 5: the classroom: exercises and their checkers, widgets, figures, the leaderboard, the chapter setup
    "classroom": ["classroom"],
    # 6: the entry points: the package, and the command line (its subcommands in cli/)
    "entry": ["__init__", "__main__", "cli"],
}
LEVEL = {mod: i for i, mods in enumerate(LAYERS.values()) for mod in mods}


def unit(parts: tuple[str, ...]) -> str:
    """The layer unit of a module path inside the package: its top-level module, or its subpackage."""
    return parts[0]


def modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PKG).with_suffix("").parts): p for p in sorted(PKG.rglob("*.py"))}


def imports(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported module of the package, line) for every relative import in the file, at any depth."""
    package = name.split(".")[:-1]                              # the package the file sits in
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            if node.module:
                found.append((".".join(base + node.module.split(".")), node.lineno))
            else:                                                   # from . import settings
                found += [(".".join(base + [a.name]), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for n in names:
                if n and n.split(".")[0] == "musictx_lite":
                    found.append((".".join(n.split(".")[1:]) or "__init__", node.lineno))
    return found


def graph(within: str | None = None) -> dict[str, set[str]]:
    """Unit -> the units it imports, self-imports dropped. With ``within`` (a subpackage): its modules ->
    the modules of the same subpackage they import (its ``__init__`` left out: it only re-exports)."""
    def node(name: str) -> str | None:
        parts = name.split(".")
        if within is None:
            return unit(tuple(parts))
        inside = parts[0] == within and len(parts) > 1 and parts[-1] != "__init__"
        return name if inside and name in names else None

    names = modules()
    g: dict[str, set[str]] = {}
    for name, path in names.items():
        src = node(name)
        if src is None:
            continue
        g.setdefault(src, set())
        for target, _ in imports(name, path):
            dst = node(target)
            if dst is not None and dst != src:
                g[src].add(dst)
    return g


def test_every_module_has_a_layer():
    units = {unit(tuple(n.split("."))) for n in modules()}
    assert units - set(LEVEL) == set(), "give each new module its layer in tests/test_layers.py"
    assert set(LEVEL) - units == set(), "a layer lists a module that no longer exists"


def test_no_import_points_upward():
    upward = []
    for name, path in modules().items():
        src = unit(tuple(name.split(".")))
        for target, line in imports(name, path):
            dst = unit(tuple(target.split(".")))
            if dst in LEVEL and LEVEL[dst] > LEVEL[src]:
                upward.append(f"{path.relative_to(PKG.parent)}:{line} ({list(LAYERS)[LEVEL[src]]}) imports "
                              f"{dst} ({list(LAYERS)[LEVEL[dst]]})")
    assert upward == []


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (one per back edge)."""
    found, state = [], {}

    def visit(n, stack):
        state[n] = "open"
        for m in sorted(g.get(n, ())):
            if state.get(m) == "open":
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m, stack + [m])
        state[n] = "done"

    for n in sorted(g):
        if n not in state:
            visit(n, [n])
    return found


def test_the_imports_form_no_cycle():
    assert cycles(graph()) == []


@pytest.mark.parametrize("subpackage", ["io", "models", "engine", "study", "classroom"])
def test_no_cycle_inside_a_subpackage(subpackage):
    g = graph(within=subpackage)
    assert len(g) >= 4                                  # the subpackage's modules were found
    assert cycles(g) == []


@pytest.mark.parametrize("g,has_cycle", [({"a": {"b"}, "b": {"c"}, "c": set()}, False),
                                         ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
                                         ({"a": {"a"}}, True)])
def test_the_cycle_search_can_fail(g, has_cycle):
    assert bool(cycles(g)) == has_cycle


def test_the_import_reader_sees_lazy_and_relative_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from . import settings\nfrom .data import Piece\n\ndef f():\n    from ..x import y\n"
                   "    import musictx_lite.study.hub\n")
    found = [t for t, _ in imports("exercises.m", src)]
    assert found == ["exercises.settings", "exercises.data", "x", "study.hub"]


def test_settings_are_read_in_one_place(monkeypatch):
    from musictx_lite import settings

    readers = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                     if p.name != "settings.py" and re.search(r"os\.environ|getenv", p.read_text()))
    assert readers == []
    monkeypatch.setenv("MUSICTX_DATA", " jsb ")
    monkeypatch.setenv("MUSICTX_PROGRESS", "0")
    monkeypatch.delenv("MUSICTX_PROFILE", raising=False)
    assert settings.data() == "jsb" and settings.progress() is False and settings.profile() is None
    monkeypatch.setenv("MUSICTX_PROFILE", "")                       # set but empty: as if unset
    assert settings.profile() is None


CONFIGS = {"ModelConfig", "TrainConfig"}


def config_merges(tree: ast.AST) -> list[int]:
    """Lines that build a ModelConfig or TrainConfig from settings put together from several places: a
    ``**`` of a dict display with ``**`` in it (``{**a, **b}``), of ``a | b``, or of ``x.__dict__``, or
    ``dataclasses.replace`` with ``**`` keywords."""
    def merged(v: ast.AST) -> bool:
        return ((isinstance(v, ast.Dict) and None in v.keys) or isinstance(v, ast.BinOp)
                or any(isinstance(n, ast.Attribute) and n.attr == "__dict__" for n in ast.walk(v)))

    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        star = [k.value for k in node.keywords if k.arg is None]
        if (name in CONFIGS and any(merged(v) for v in star)) or (name == "replace" and star
                                                                  and isinstance(f, ast.Name)):
            lines.append(node.lineno)
    return lines


def test_one_function_puts_a_runs_settings_together():
    """``engine.profiles.resolve`` is the one place where a ModelConfig or TrainConfig is merged from several
    sources; any other module asks it."""
    found = {str(p.relative_to(PKG)): config_merges(ast.parse(p.read_text())) for p in PKG.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {"engine/profiles.py": found["engine/profiles.py"]}
    assert found["engine/profiles.py"]                      # the profiles are seen (gpu: the recipe, changed)


@pytest.mark.parametrize("src, merges", [
    ("ModelConfig(**{**a, 'context': 4})", True), ("TrainConfig(**{**t.__dict__, **kw})", True),
    ("TrainConfig(**(a | b))", True), ("replace(cfg, **{k: 1})", True), ("ModelConfig(**ck['model_config'])", False),
    ("replace(cfg, context=4)", False), ("TrainConfig(max_steps=3)", False)])
def test_the_merge_search_can_fail(src, merges):
    assert bool(config_merges(ast.parse(src))) == merges


# ---------------------------------------------------------------- rooms of a readable size

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 120


def too_long(path: Path) -> list[str]:
    """The module itself if it has more than MAX_MODULE_LINES lines, and each function (or method) of more than
    MAX_FUNCTION_LINES, docstring and nested functions included."""
    src = path.read_text()
    found = [f"{path.name}: {src.count(chr(10))} lines"] if src.count("\n") > MAX_MODULE_LINES else []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name}: {n} lines")
    return found


def test_no_module_and_no_function_is_too_long():
    assert [f for path in modules().values() for f in too_long(path)] == []


def test_the_length_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n" + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES))
    assert too_long(tmp_path / "long.py") == ["long.py: 501 lines", "long.py:1 f: 121 lines"]
