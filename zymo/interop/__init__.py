"""zymo kernels inside other frameworks' programs (`zm.torch`), each imported on first use so
that `import zymo` imports no framework."""
