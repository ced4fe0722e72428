"""The package's version (pyproject.toml reads it). Colab's install cells install the ref the Colab button
opens, ``repository.branch`` of ``_config.yml`` (``python -m scripts.student_notebooks --links``)."""

__version__ = "0.1.0"
