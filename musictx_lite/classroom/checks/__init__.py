"""The exercise checkers, one module per chapter with code exercises; ``classroom.checkers`` lists them all.

No module here holds a reference solution (``tests/classroom/test_no_solutions.py``)."""
