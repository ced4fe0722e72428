"""A graded course from the musictx-lite book: one assignment a week for twelve weeks, each with auto-graded
questions (public tests in the student's notebook, hidden tests in the grader) and a written question with a rubric.

    python -m musictx_course build --secret S --roster roster.csv --out course/
    python -m musictx_course grade course/autograder --week 3 submissions/ --out week03.csv

The lecturer's secret decides every hidden value and each student's variant (``spec.derive``): nothing in the
repository gives them, and two courses built with different secrets differ. A submission is graded without running
its notebook: its answer cells are executed in a process of their own, each answer function is called on the hidden
inputs with a time limit per question, and only the outputs come back to the grader, which compares them with the
reference answers (``grade``). Nothing a submission does stops the run.
"""
