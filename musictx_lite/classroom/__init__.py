"""The classroom: each chapter's exercises with their checkers, widgets, figures, the leaderboard, and the
first cell of every chapter (``setup``).
"""
