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
GridSync = Trait("GridSync", "every thread of the launch waits here for all the others (a "
                 "barrier of the grid): its blocks must all be resident, a cooperative launch")
Fence = Trait("Fence", "orders the thread's memory accesses as other threads observe them: no "
              "load, store or atomic moves across it (barriers are fences too)")
Convergent = Trait("Convergent", "needs the threads of a warp or block to arrive together")
ReadsMemory = Trait("ReadsMemory", "reads array memory")
WritesMemory = Trait("WritesMemory", "writes array memory")
Atomic = Trait("Atomic", "an indivisible read-modify-write")
Output = Trait("Output", "reports to the host (print's output, a raised exception): kept, "
               "never merged, moved or repeated")
OrderDependent = Trait("OrderDependent", "its result depends on how the threads of the launch "
                       "interleave (an atomic's old value, the lanes a warp runs together): "
                       "running it again may give another value, so a derivative keeps the "
                       "value its forward sweep got and never recomputes it")
ThreadVarying = Trait("ThreadVarying", "may produce a different value in each thread")
Allocates = Trait("Allocates", "creates an array (shared, local or constant)")
IsolatedFromAbove = Trait("IsolatedFromAbove", "its regions may not use values defined outside")
ConstantLike = Trait("ConstantLike", "produces a compile-time constant held in its attributes")
Loop = Trait("Loop", "its body region runs repeatedly; results are loop-carried values")

# Facts the passes (fold, DCE, inline) rely on. A trait that names fields is an interface:
# every op carrying it has those fields, with the meaning the doc gives.
ZeroIsIdentity = Trait("ZeroIsIdentity", "binary (`lhs`, `rhs`): lhs op 0 == lhs for integers "
                       "and bools (0 op rhs == rhs too when Commutative)")
OneIsIdentity = Trait("OneIsIdentity", "binary (`lhs`, `rhs`): lhs op 1 == lhs for every type, "
                      "floats included (1 op rhs == rhs too when Commutative)")
ZeroIsAbsorbing = Trait("ZeroIsAbsorbing", "binary (`lhs`, `rhs`): lhs op 0 == 0 for integers "
                        "and bools (0 op rhs == 0 too when Commutative)")
Involution = Trait("Involution", "unary (`x`): op(op(x)) == x")
Conversion = Trait("Conversion", "unary (`x`): converts x to the result type; the identity when "
                   "the types are equal")
Comparison = Trait("Comparison", "binary (`lhs`, `rhs`): a bool that depends only on how lhs "
                   "and rhs order, so comparing an integer with itself is decided")
Selects = Trait("Selects", "(`cond`, `if_true`, `if_false`): if_true where cond holds, else "
                "if_false")
Extent = Trait("Extent", "(`array`, `axis`): the extent of one axis of the array, known at "
               "compile time when the array type has a static shape")
Conditional = Trait("Conditional", "(`cond`, `then_region`, `else_region`): runs the then region "
                    "where cond holds, else the else region; the region's terminator yields "
                    "the results")
CountedLoop = Trait("CountedLoop", "a loop over range(`lower`, `upper`, `step`) that always "
                    "terminates: `body` arguments are (induction variable, *carried), `inits` "
                    "the carried values' initial values, the body's terminator yields the next "
                    "carried values and the results are their final values")
CallsFunction = Trait("CallsFunction", "calls the function of the module named by its `callee` "
                      "attribute with its operands; its results are the callee's")
Aliases = Trait("Aliases", "(`base`, ...): the result is an array over the memory of the array "
                "`base` (a slice, a reshape, a reinterpretation of its bytes): an access through "
                "the result is an access to `base`, so analyses that reason about one array's "
                "memory follow the result back to `base` (`array_origin` in ops/views.py)")
