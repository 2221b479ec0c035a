"""Backends: the shared LLVM lowering, the CPU and CUDA targets, and the interpreter."""
