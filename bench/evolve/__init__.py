"""Workloads for the evolutionary optimizer (GEVO-style): kernels, inputs, checks."""
