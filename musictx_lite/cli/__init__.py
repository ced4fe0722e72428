"""The command line's subcommands, one module each (or one per group), each with its options beside its ``run``.

``python -m musictx_lite`` (``musictx_lite/__main__.py``) assembles them into one parser; ``args`` holds the
argument types and the options several subcommands share. Notebook: book/using.md explains the command line.
"""
