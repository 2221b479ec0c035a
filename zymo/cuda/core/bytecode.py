"""numba's view of a function's Python bytecode (`FunctionIdentity`, `ByteCode`), for code
written against numba.cuda that inspects it, with `core.controlflow`. zymo's compiler reads
the source (`zymo.frontend`), never bytecode.

Instructions come from `dis` (which decodes EXTENDED_ARG, inline caches and jump targets for
each Python version). Their offsets are the code object's plus 2, as numba numbers them: a NOP
sits at offset 0, so that the entry block is never a jump target (a function starting with
`while True:` jumps back to its first instruction).
"""
from __future__ import annotations

import builtins
import dis
import inspect
import itertools
from dataclasses import dataclass
from types import CodeType, ModuleType

from ..utils import PYVERSION

_SHIFT = 2
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
_TERMINATORS = frozenset(dis.opmap[name] for name in
                         ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE")
                         if name in dis.opmap)
_NOP = dis.opmap["NOP"]
_unique_ids = itertools.count(1)


def _fix_LOAD_GLOBAL_arg(arg: int) -> int:   # noqa: N802 (numba's name)
    """The index into `co_names` of a LOAD_GLOBAL's argument: from Python 3.11 its low bit
    says whether a NULL is pushed too, and the index is the rest."""
    return arg >> 1 if PYVERSION >= (3, 11) else arg


@dataclass(frozen=True)
class FunctionIdentity:
    """What identifies the function a bytecode belongs to."""

    func: object
    func_qualname: str
    func_name: str
    code: CodeType
    module: ModuleType | None
    modname: str
    filename: str
    firstlineno: int
    arg_count: int
    arg_names: tuple[str, ...]
    is_generator: bool
    unique_id: int
    unique_name: str

    @classmethod
    def from_function(cls, pyfunc) -> "FunctionIdentity":
        func = inspect.unwrap(getattr(pyfunc, "py_func", pyfunc))
        code = getattr(func, "__code__", None)
        if code is None:
            raise TypeError(f"{pyfunc!r} is not a Python function: it has no bytecode")
        module = inspect.getmodule(func)
        modname = module.__name__ if module is not None else "<dynamic>"
        uid = next(_unique_ids)
        return cls(func=func, func_qualname=func.__qualname__, func_name=func.__name__,
                   code=code, module=module, modname=modname, filename=code.co_filename,
                   firstlineno=code.co_firstlineno, arg_count=code.co_argcount,
                   arg_names=code.co_varnames[:code.co_argcount],
                   is_generator=inspect.isgeneratorfunction(func) or
                   inspect.iscoroutinefunction(func),
                   unique_id=uid, unique_name=f"{func.__qualname__}${uid}")

    @property
    def pysig(self) -> inspect.Signature:
        return inspect.signature(self.func)


class ByteCodeInst:
    """One instruction: `offset` (numba's numbering), `next` (the following instruction's
    offset), `opcode`, `opname`, `arg` (the raw argument, None without one), `lineno` and
    `col` (1-based; 0 where Python does not record it)."""

    __slots__ = ("offset", "next", "opcode", "opname", "arg", "lineno", "col", "_target")

    def __init__(self, offset, opcode, opname, arg, nextoffset, target=None, lineno=-1, col=0):
        self.offset = offset
        self.next = nextoffset
        self.opcode = opcode
        self.opname = opname
        self.arg = arg
        self.lineno = lineno
        self.col = col
        self._target = target

    @property
    def is_jump(self) -> bool:
        return self._target is not None

    @property
    def is_terminator(self) -> bool:
        return self.opcode in _TERMINATORS

    def get_jump_target(self) -> int:
        if self._target is None:
            raise ValueError(f"{self.opname} at offset {self.offset} is not a jump")
        return self._target

    def __repr__(self):
        return f"{self.opname}(arg={self.arg}, lineno={self.lineno})"


def _instructions(code: CodeType) -> list[ByteCodeInst]:
    decoded = list(dis.get_instructions(code))
    starts = [i.offset + _SHIFT for i in decoded[1:]] + [len(code.co_code) + _SHIFT]
    lines = dict(dis.findlinestarts(code))
    out = [ByteCodeInst(0, _NOP, "NOP", None, _SHIFT, lineno=code.co_firstlineno)]
    line = code.co_firstlineno
    for ins, nxt in zip(decoded, starts):
        line = lines.get(ins.offset) or line
        positions = getattr(ins, "positions", None)
        col = positions.col_offset + 1 if positions is not None and \
            positions.col_offset is not None else 0
        target = None
        if ins.opcode in _JUMPS:
            dest = getattr(ins, "jump_target", None)
            target = (ins.argval if dest is None else dest) + _SHIFT
        out.append(ByteCodeInst(ins.offset + _SHIFT, ins.opcode, ins.opname, ins.arg, nxt,
                                target, line, col))
    return out


class ByteCode:
    """The decoded bytecode of a function: iterating gives its instructions in order;
    `bc[offset]` the one at `offset`; `labels` the sorted offsets that jumps (and, from
    Python 3.11, exception handlers) lead to, with 0."""

    def __init__(self, func_id: FunctionIdentity):
        code = func_id.code
        self.func_id = func_id
        self.co_names = code.co_names
        self.co_varnames = code.co_varnames
        self.co_consts = code.co_consts
        self.co_cellvars = code.co_cellvars
        self.co_freevars = code.co_freevars
        self.table = {inst.offset: inst for inst in _instructions(code)}
        entries = getattr(dis.Bytecode(code), "exception_entries", ())
        self.exception_entries = tuple(
            entry._replace(start=entry.start + _SHIFT, end=entry.end + _SHIFT,
                           target=entry.target + _SHIFT) for entry in entries)
        labels = {inst.get_jump_target() for inst in self.table.values() if inst.is_jump}
        labels.update(entry.target for entry in self.exception_entries)
        self.labels = sorted(labels | {0})

    def __iter__(self):
        return iter(self.table.values())

    def __getitem__(self, offset: int) -> ByteCodeInst:
        return self.table[offset]

    def __contains__(self, offset: int) -> bool:
        return offset in self.table

    def find_exception_entry(self, offset: int):
        """The innermost exception-table entry covering `offset` (None if none does)."""
        covering = [e for e in self.exception_entries if e.start <= offset < e.end]
        return max(covering, key=lambda e: e.depth) if covering else None

    def dump(self) -> str:
        labels = set(self.labels)
        return "\n".join(f"{'>' if off in labels else ' '} {off:10d}\t{inst!r}"
                         for off, inst in self.table.items())

    def get_used_globals(self) -> dict:
        """{name: value} of the globals (or builtins) this code and its nested code read."""
        func = self.func_id.func
        globs = func.__globals__
        builtin = globs.get("__builtins__", builtins)
        builtin = builtin.__dict__ if isinstance(builtin, ModuleType) else builtin
        used = {}
        pending = [self.func_id.code]
        while pending:
            code = pending.pop()
            for ins in dis.get_instructions(code):
                if ins.opname == "LOAD_GLOBAL" and ins.argval not in used:
                    name = ins.argval
                    used[name] = globs[name] if name in globs else builtin[name]
            pending.extend(c for c in code.co_consts if isinstance(c, CodeType))
        return used
