"""Kernel families: one module and one template each."""
