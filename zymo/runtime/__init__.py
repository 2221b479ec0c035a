"""The runtime: kernels, launches, specialization caches (joins the compiler's stages)."""
from .kernel import Kernel, kernel  # noqa: F401
