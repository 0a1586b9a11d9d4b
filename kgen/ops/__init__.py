"""Kernel families: one module and one template each. Importing this package registers them all."""
from . import matmul, reduce, skinny, tensorcore  # noqa: F401
