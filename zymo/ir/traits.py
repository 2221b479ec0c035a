"""Traits: the properties of ops that passes and backends ask about (never op names)."""
from __future__ import annotations


class Trait:
    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc

    def __repr__(self) -> str:
        return self.name


Pure = Trait("Pure", "no side effects and no memory access; result depends only on operands")
Speculatable = Trait("Speculatable", "safe to execute even where the program would not (no traps)")
Commutative = Trait("Commutative", "the two operands may be swapped")
Terminator = Trait("Terminator", "ends a block; passes values to the enclosing op")
Barrier = Trait("Barrier", "a block-wide synchronization point")
Convergent = Trait("Convergent", "needs the threads of a warp or block to arrive together")
ReadsMemory = Trait("ReadsMemory", "reads array memory")
WritesMemory = Trait("WritesMemory", "writes array memory")
Atomic = Trait("Atomic", "an indivisible read-modify-write")
ThreadVarying = Trait("ThreadVarying", "may produce a different value in each thread")
Allocates = Trait("Allocates", "creates an array (shared, local or constant)")
IsolatedFromAbove = Trait("IsolatedFromAbove", "its regions may not use values defined outside")
ConstantLike = Trait("ConstantLike", "produces a compile-time constant held in its attributes")
Loop = Trait("Loop", "its body region runs repeatedly; results are loop-carried values")
