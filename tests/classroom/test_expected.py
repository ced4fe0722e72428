"""The checkers' stored values (musictx_lite/classroom/checks/expected.json) are what the book's reference solutions
compute now on the checkers' seeded inputs: a checker that holds no reference code still checks against it."""
import json

from musictx_solutions import expected

from musictx_lite.classroom.grading import EXPECTED


def test_the_stored_values_are_what_the_references_compute():
    stored = json.loads(EXPECTED.read_text())
    fresh = expected.compute()
    assert set(stored) == set(fresh) and fresh, (sorted(stored), sorted(fresh))
    for chapter in fresh:
        assert expected.close(fresh[chapter], stored[chapter]), f"chapter {chapter}: run musictx_solutions.expected"


def test_close_can_fail():
    assert expected.close({"a": [1.0, 2.0]}, {"a": [1.0, 2.0 + 1e-9]})
    assert not expected.close({"a": [1.0, 2.0]}, {"a": [1.0, 2.1]})
    assert not expected.close({"a": [1.0]}, {"a": [1.0, 2.0]}) and not expected.close({"a": 1}, {"b": 1})
