"""The ``delink`` command line, one module per domain over the library functions that hold the jobs."""
from . import evaluate, linkage, protect, redaction, serve, setvalued, tabular  # noqa: F401  (each registers its commands)
from .app import app, main

__all__ = ["app", "main"]
