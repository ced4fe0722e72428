"""Chapter 4 exercises.

Notebook: notebooks/04_*.ipynb
"""
from __future__ import annotations

__all__: list[str] = []
