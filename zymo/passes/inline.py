"""Inlining of device-function calls into their callers, then removal of unused functions."""
from __future__ import annotations

from ..diagnostics import CompileError, Diagnostic
from ..ir.module import Module
from ..ir.operation import Operation
from ..ir.traits import CallsFunction
from ..ir.values import Value
from .common import terminator

_ACTIVE, _DONE = "active", "done"


class Inline:
    """Inline every call (ops with `CallsFunction`), callees first, then drop the functions
    nobody needs: all but the module's entry, its kernels (all are kept when the module has
    neither) and the recursive functions they reach.

    A function in a cycle of calls (recursion, direct or mutual) cannot be inlined: it stays a
    function, and calls of it stay calls; the calls in its body of other functions are inlined.
    An inlined op gets the id `<call id>/<its id in the callee>`, so ids stay stable and say
    where the op came from. A call of a function the module lacks is a `CompileError` at the
    call; every such call is reported at once.

    Verified IR in, verified IR out.
    """

    name = "inline"

    def run(self, module: Module) -> bool:
        self.module = module
        self.state: dict[str, str] = {}
        self.errors: list[Diagnostic] = []
        self.changed = False
        self.recursive = recursive_functions(module)
        roots = self._roots()
        for func in roots:
            if func.attrs["sym_name"] not in self.state:
                self._expand(func)
        if self.errors:
            raise CompileError(self.errors)
        kept = set(map(id, roots)) | {id(module.functions[name]) for name in self.state
                                      if name in self.recursive}
        for name in list(module.functions):
            if id(module.functions[name]) not in kept:
                del module.functions[name]
                self.changed = True
        return self.changed

    def _roots(self) -> list[Operation]:
        functions = list(self.module)
        kept = [f for f in functions
                if f.attrs["sym_name"] == self.module.entry or f.attrs.get("kind") == "kernel"]
        return kept or functions

    def _expand(self, func: Operation) -> None:
        """Inline every call in `func` of a function outside a cycle, after inlining the calls
        in its callees."""
        self.state[func.attrs["sym_name"]] = _ACTIVE
        calls = [op for op in func.walk() if op.has_trait(CallsFunction)]
        callees: list[Operation | None] = [self._callee(call) for call in calls]
        self.state[func.attrs["sym_name"]] = _DONE
        if self.errors:
            return
        for call, callee in zip(calls, callees):
            assert callee is not None
            if call.callee not in self.recursive:
                inline_call(call, callee)
                self.changed = True

    def _callee(self, call: Operation) -> Operation | None:
        name = call.callee
        callee = self.module.functions.get(name)
        if callee is None:
            self.errors.append(Diagnostic(call.loc, f"call of `{name}`, which is not defined",
                                          "define it with @zm.func"))
        elif self.state.get(name) is None:
            self._expand(callee)
        return callee


def recursive_functions(module: Module) -> set[str]:
    """The names of the functions that can reach themselves through calls."""
    calls = {name: {op.callee for op in func.walk() if op.has_trait(CallsFunction)}
             for name, func in module.functions.items()}
    found = set()
    for start in calls:
        seen, todo = set(), list(calls[start])
        while todo:
            name = todo.pop()
            if name == start:
                found.add(start)
                break
            if name not in seen and name in calls:
                seen.add(name)
                todo.extend(calls[name])
    return found


def inline_call(call: Operation, callee: Operation) -> None:
    """Replace `call` by a copy of `callee`'s body, its results by the returned values."""
    body = callee.regions[0].block
    mapping: dict[Value, Value] = dict(zip(body.args, call.operands))
    assert call.parent is not None
    for op in body.ops[:-1]:
        copy = op.clone(mapping)
        for inner in copy.walk():
            inner.id = f"{call.id}/{inner.id}"
        call.parent.insert_before(call, copy)
    returned = [mapping.get(value, value) for value in terminator(callee.regions[0]).operands]
    for result, value in zip(call.results, returned):
        result.replace_all_uses_with(value)
    call.erase()
