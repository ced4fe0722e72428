"""The release: the git tag ``v<version>`` that Colab's install cells pin (``scripts/set_version.py``)."""

__version__ = "0.1.0"
