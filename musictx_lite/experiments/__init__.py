"""Experiments: training, sampling, sizes and budgets (profiles), the comparison, benchmarks, the paper's
reproduction, and the pretrained models it ships (chapter 11 and the command line).
"""
