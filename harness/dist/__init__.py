"""Evaluation on a Ray cluster (--ray): the connection, the actors that run pairs, the driver's scheduler."""
