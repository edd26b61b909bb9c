"""The package's version: the one place it is written (pyproject.toml reads it here, ``[tool.hatch.version]``);
nothing else lives here, so reading it (``pai --version``, OpenPAI's ``GET /api/v2/info``) imports nothing more."""

__version__ = "0.1.0"
