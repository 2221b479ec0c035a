"""numba's `cuda.tests` package as far as tests written for numba import from it."""
