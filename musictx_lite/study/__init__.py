"""The study: what the book measures with the engine. Chapter 0's baselines, chapter 11's comparison and its
ledger, the benchmarks, the reproduction of the paper's table, the shipped models, and chapter 11's passages
that depend on its run.
"""
