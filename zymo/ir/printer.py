"""A deterministic, readable text form of the IR."""
from __future__ import annotations

from typing import Any

import numpy as np

from .operation import Operation, Region
from .values import Value


def format_attr(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, np.ndarray):
        return f"dense<{'x'.join(map(str, value.shape))} x {value.dtype}>"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_attr(v) for v in value) + ")"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class Printer:
    def __init__(self, show_ids: bool = False, show_locs: bool = False):
        self.names: dict[Value, str] = {}
        self.taken: set[str] = set()
        self.counter = 0
        self.show_ids = show_ids
        self.show_locs = show_locs
        self.lines: list[str] = []
        self.annotations: dict[Operation, list[str]] = {}

    def name(self, value: Value) -> str:
        if value not in self.names:
            hint = value.name_hint
            if hint and hint not in self.taken:
                text = hint
            elif hint:
                suffix = 1
                while f"{hint}{suffix}" in self.taken:
                    suffix += 1
                text = f"{hint}{suffix}"
            else:
                text = str(self.counter)
                self.counter += 1
            self.taken.add(text)
            self.names[value] = "%" + text
        return self.names[value]

    def typed(self, value: Value) -> str:
        return f"{self.name(value)}: {value.type}"

    def op_line(self, op: Operation) -> str:
        results = ", ".join(self.name(r) for r in op.results)
        text = f"{results} = " if results else ""
        text += f"{op.name}({', '.join(self.name(v) for v in op.operands)})"
        shown = {k: v for k, v in op.attrs.items() if k not in ("callee_type",)}
        if shown:
            pairs = (f"{k} = {format_attr(v)}" for k, v in sorted(shown.items()))
            text += " {" + ", ".join(pairs) + "}"
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        return text

    def suffix(self, op: Operation) -> str:
        parts = []
        if self.show_ids:
            parts.append(f"id {op.id}")
        if self.show_locs:
            parts.append(str(op.loc))
        return ("  // " + ", ".join(parts)) if parts else ""

    def print_op(self, op: Operation, indent: int) -> None:
        pad = "  " * indent
        line = self.op_line(op)
        defs = type(op)._region_defs
        if not op.regions:
            self.lines.append(pad + line + self.suffix(op))
        else:
            for index, reg in enumerate(op.regions):
                label = defs[index].name.replace("_region", "") if index < len(defs) else "region"
                head = line + " " if index == 0 else "} "
                self.lines.append(pad + head + self.region_head(label, reg) +
                                  (self.suffix(op) if index == 0 else ""))
                for inner in reg.block.ops:
                    self.print_op(inner, indent + 1)
            self.lines.append(pad + "}")
        for note in self.annotations.get(op, []):
            self.lines.append(pad + "  ^^^ " + note)

    def region_head(self, label: str, reg: Region) -> str:
        args = ", ".join(self.typed(a) for a in reg.block.args)
        return f"{label}({args}) {{" if args else f"{label} {{"

    def print_func(self, func: Operation) -> None:
        ftype = func.attrs["function_type"]
        args = ", ".join(self.typed(a) for a in func.regions[0].block.args)
        outs = ", ".join(map(str, ftype.outputs))
        head = f"func.func @{func.attrs['sym_name']}({args})"
        if ftype.outputs:
            head += f" -> ({outs})"
        head += f" {func.attrs.get('kind', 'device')} {{" + self.suffix(func)
        self.lines.append(head)
        for inner in func.regions[0].block.ops:
            self.print_op(inner, 1)
        self.lines.append("}")


def print_op(op: Operation, **options) -> str:
    printer = Printer(**options)
    if "function_type" in op.attrs:
        printer.print_func(op)
    else:
        printer.print_op(op, 0)
    return "\n".join(printer.lines)


def print_module(module, annotations: dict | None = None, **options) -> str:
    printer = Printer(**options)
    printer.annotations = annotations or {}
    for index, func in enumerate(module):
        if index:
            printer.lines.append("")
        printer.print_func(func)
    return "\n".join(printer.lines)

