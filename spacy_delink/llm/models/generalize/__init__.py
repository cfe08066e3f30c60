"""The deterministic generalizer: candidate forms (``forms``), the choice among them (``choose``), the model (``model``)."""
from .choose import Generalizer
from .forms import KINDS, candidates

__all__ = ["KINDS", "Generalizer", "candidates"]
