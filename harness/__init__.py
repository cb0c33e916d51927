"""Evaluator replica of FlashInfer-Bench for the MLSys 2026 GDN track (see README.md)."""
__version__ = "0.2.0"

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout: workloads/, submission/, results/, .cache/
