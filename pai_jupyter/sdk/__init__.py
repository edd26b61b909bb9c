"""High-level SDK: the Estimator."""

from .estimator import Estimator

__all__ = ["Estimator"]
