"""The verifier: structural checks plus each op's own hook, every problem collected."""
from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import InternalError
from .operation import Block, Operation
from .traits import IsolatedFromAbove, Terminator
from .values import BlockArgument, OpResult, Value


@dataclass(frozen=True)
class Problem:
    op: Operation
    message: str


def verify(module) -> list[Problem]:
    """Every problem in `module` (a Module or a single op), in program order."""
    problems: list[Problem] = []
    roots = [module] if isinstance(module, Operation) else list(module)
    for root in roots:
        _verify_op(root, set(), problems)
    return problems


def _verify_op(op: Operation, visible: set[Value], problems: list[Problem]) -> None:
    for index, value in enumerate(op.operands):
        if value not in visible:
            problems.append(Problem(op, f"operand #{index} does not dominate this use"))
        if not any(u.operation is op and u.index == index for u in value.uses):
            problems.append(Problem(op, f"operand #{index} is missing from its value's use list"))
    hook = getattr(op, "verify_", None)
    if hook is not None:
        problems.extend(Problem(op, message) for message in hook())
    inner_visible = set() if op.has_trait(IsolatedFromAbove) else visible
    for region in op.regions:
        if region.parent is not op:
            problems.append(Problem(op, "region parent link is broken"))
        _verify_block(region.block, set(inner_visible), problems)


def _verify_block(block: Block, visible: set[Value], problems: list[Problem]) -> None:
    visible.update(block.args)
    for arg in block.args:
        if not isinstance(arg, BlockArgument) or arg.block is not block:
            problems.append(Problem(block.parent_op, "block argument link is broken"))
    for position, op in enumerate(block.ops):
        if op.parent is not block:
            problems.append(Problem(op, "op parent link is broken"))
        if op.has_trait(Terminator) and position != len(block.ops) - 1:
            problems.append(Problem(op, "terminator in the middle of a block"))
        _verify_op(op, visible, problems)
        for result in op.results:
            if not isinstance(result, OpResult) or result.owner is not op:
                problems.append(Problem(op, "result link is broken"))
        visible.update(op.results)


class VerifyError(InternalError):
    """Invalid IR; the text shows the IR with each problem under its op."""

    def __init__(self, text: str, problems: list[Problem] | None = None):
        self.problems = problems or []
        super().__init__(text)

    def __reduce__(self):
        return (VerifyError, (self.args[0],))


def check(module, stage: str = "") -> None:
    """Raise VerifyError listing every problem, or return quietly."""
    problems = verify(module)
    if not problems:
        return
    from .printer import print_module, print_op
    notes: dict[Operation, list[str]] = {}
    for problem in problems:
        notes.setdefault(problem.op, []).append(problem.message)
    if isinstance(module, Operation):
        body = print_op(module)
    else:
        body = print_module(module, annotations=notes, show_locs=True)
    where = f" after {stage}" if stage else ""
    summary = "\n".join(f"{p.op.loc}: {p.op.name}: {p.message}" for p in problems)
    text = f"invalid IR{where}: {len(problems)} problem(s)\n{summary}\n\n{body}"
    raise VerifyError(text, problems)
