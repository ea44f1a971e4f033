"""promptls' IO side: the command line, the language server and what they read and write.

``__version__`` is the package's version, the one source of it: ``pyproject.toml`` reads
it from here (``[tool.setuptools.dynamic]``), so ``promptls --version`` and the server's
``serverInfo`` need no package-metadata lookup (``importlib.metadata`` imports ``email``,
``zipfile``…: 10-20 ms of a command's start).
"""

__version__ = "0.1.0"
