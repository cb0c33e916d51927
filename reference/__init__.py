"""Readable formulations of the GDN recurrence used to check the definition's reference and our kernels."""
