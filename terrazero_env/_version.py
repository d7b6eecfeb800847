"""The package version, declared once: ``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``),
``terrazero_env.__version__``, ``build_info()`` and ``terrazero --version`` report it."""

__version__ = "0.1.0"
