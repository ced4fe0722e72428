"""Set the release that the package and every chapter's Colab install cell name, in one step.

    python -m scripts.set_version 0.2.0

The version lives in ``musictx_lite/version.py`` (``__version__``; pyproject.toml reads it). The
install cells pin the git tag ``v<version>`` of the repository in ``_config.yml``; this script rewrites
them and the student notebooks, and tests/book/test_book.py fails when the two disagree. Tag the release
(``git tag v0.2.0 && git push --tags``) so that Colab can install it.
"""
from __future__ import annotations

import re
import subprocess
import sys

import nbformat

from scripts import ROOT
INIT = ROOT / "musictx_lite" / "version.py"
PIN = re.compile(r'("musictx-lite @ git\+\S+?@)v[^"]+(")')
PINS = re.compile(r'(pins = "https://raw\.githubusercontent\.com/\S+?/)v[^"/]+(")')   # colab-constraints.txt
VERSION = re.compile(r'__version__ = "[^"]+"')


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not re.fullmatch(r"\d+\.\d+\.\d+", argv[0]):
        print("error: give one version, like 0.2.0", file=sys.stderr)
        return 2
    version = argv[0]
    INIT.write_text(VERSION.sub(f'__version__ = "{version}"', INIT.read_text(), count=1))
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code")
        cell.source = PIN.sub(rf"\g<1>v{version}\g<2>", cell.source)
        cell.source = PINS.sub(rf"\g<1>v{version}\g<2>", cell.source)
        cell.source = re.sub(r"install musictx_lite \S+, the release", f"install musictx_lite {version}, the release",
                             cell.source)
        nbformat.write(nb, path)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "student_notebooks.py")], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"musictx_lite {version}: package, install cells and student notebooks; now tag v{version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
