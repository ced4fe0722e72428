"""python -m musictx_course build | grade: the lecturer's and the TA's commands (see the package's docstring)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m musictx_course", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="student notebooks and the autograder, from the secret and the roster")
    b.add_argument("--secret", required=True, help="the lecturer's secret: every hidden value derives from it")
    b.add_argument("--roster", required=True, type=Path, help="a CSV with an id column, one row per student")
    b.add_argument("--out", required=True, type=Path)
    b.add_argument("--weeks", type=int, nargs="+", default=None, help="only these weeks (default: all)")
    g = sub.add_parser("grade", help="grade a folder of submitted notebooks of one week into a CSV")
    g.add_argument("autograder", type=Path, help="the autograder folder that build wrote")
    g.add_argument("submissions", type=Path, help="a folder of <student>.ipynb files")
    g.add_argument("--week", required=True, type=int)
    g.add_argument("--out", required=True, type=Path, help="the CSV to write (logs go beside it)")
    g.add_argument("--workers", type=int, default=2, help="submissions graded at once (default 2)")
    a = ap.parse_args(argv)
    try:
        if a.command == "build":
            from .build import build

            build(a.secret, a.roster, a.out, a.weeks)
        else:
            from .grade import grade

            if not (a.autograder / "course.json").is_file():
                raise ValueError(f"{a.autograder} holds no course.json: give the autograder folder build wrote")
            if not a.submissions.is_dir():
                raise ValueError(f"{a.submissions} is not a folder of submissions")
            grade(a.autograder, a.week, a.submissions, a.out, a.workers)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
