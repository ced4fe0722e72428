"""The engine: the training loop and its callbacks, precision, several processes, distillation, sampling, and
the settings of a run (profiles and ``resolve``). Chapter 1 shows the loop; every chapter trains with it.
"""
