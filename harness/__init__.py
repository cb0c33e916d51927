"""Evaluator replica of FlashInfer-Bench for the MLSys 2026 GDN track (see README.md)."""
__version__ = "0.2.0"
