"""Evaluator replica of FlashInfer-Bench for the MLSys 2026 GDN track (see README.md)."""
__version__ = "0.1.0"
