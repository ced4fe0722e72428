"""What chapter 11 says that depends on its run, one function per passage: the data it trained on, whether
the shipped models were scored again, what the sprint can be set beside. A build that cannot load the
official JSB split (offline, no local copy) trains on the embedded chorales, and every passage must read
true there too; tests/study/test_chapter11.py builds both.

Notebook: notebooks/11_comparison.ipynb (each passage is printed by a cell whose input the book hides).
"""
from __future__ import annotations

from ..io.data import Splits


def is_official(data: Splits) -> bool:
    """Whether ``data`` is the official JSB split (``load_jsb``), the data of the paper's table."""
    return data.source.startswith("official")


def _sizes(data: Splits) -> str:
    return f"{len(data.train)} chorales to train on, {len(data.valid)} to validate, {len(data.test)} to test"


def data_passage(data: Splits) -> str:
    """The contenders' data."""
    if is_official(data):
        return ("All of them train on the same data: the official JSB split of Boulanger-Lewandowski et al. "
                f"({_sizes(data)}), the data of the paper's table at the end of the chapter, rather than the "
                "chorales embedded in the package that chapters 0-10 use.")
    return ("All of them train on the same data. The official JSB split, the data of the paper's table at the "
            "end of the chapter, could not be loaded in this build (no internet and no local copy), so they "
            f"train on the chorales embedded in the package, as chapters 0-10 do ({_sizes(data)}). The sprint below is "
            "therefore not on the paper's data, and nothing in it can be set beside the paper's numbers or "
            "the shipped models', which were made on the official split.")


def sprint_and_shipped(data: Splits) -> str:
    """What the sprint's relative row can be set beside."""
    if is_official(data):
        return ("The shipped relative model further down, trained with a recipe for far longer on the same "
                "data, scores far below its sprint row (the paper's table prints both).")
    return ("The shipped relative model further down was trained with a recipe for far longer on the official "
            "split, not on this build's data, so its number is not set beside this sprint (the paper's table "
            "has no sprint row in such a build).")


def rescored(data: Splits, smoke: bool) -> str:
    """Whether this build scored the shipped models again."""
    if is_official(data) and not smoke:
        return ("The paper's table scores the shipped models again in this build, on this machine, on the "
                "official split, and its cell checks that each number is its record's to 0.001.")
    why = ("the smoke profile scores a few pieces only" if is_official(data) else
           "this build could not load the official split, the data they were scored on")
    return (f"In this build the paper's table prints the shipped models' recorded numbers, not scored again: "
            f"{why}. `tests/study/test_pretrained.py` scores them again in every CI run and fails if a number "
            "moved by more than 0.001.")


def copying_share(far: float) -> str:
    """What copying from a longer context could buy, in words, from the measured share of steps."""
    return (f"The steps a longer context lets the model copy are {far:.1%} of all steps, and the cell above turns "
            "that share into nats: free copying of every such step would save about that much.")


def sprint_against_file(data: Splits) -> str:
    """What the comparison of the sprint's ranks with the file's compares."""
    if is_official(data):
        return "Both the sprint and the file trained on the official split."
    return (f"The sprint of this build trained on {data.source}, the file on the official split: the moves "
            "below set runs on different data side by side, and say how the rank depends on data and budget "
            "together.")


def sprint_data(data: Splits) -> str:
    """What to add where a sentence sets a number of the sprint beside one of the file: nothing on the official
    split, else that the two come from different data."""
    return "" if is_official(data) else " (on this build's data, not the file's)"


def prompts(data: Splits) -> str:
    """Where the shipped model's prompts come from."""
    if is_official(data):
        return ("The shipped relative model continues the first bar of validation chorales of the official "
                "split, held out of its training, for four bars.")
    return (f"The shipped relative model continues the first bar of validation chorales of {data.source}, for "
            "four bars. It trained on the official split's chorales, another selection of the same Bach "
            "chorales, so it has probably seen some of these: the continuations below are not of music held "
            "out of its training.")
