"""numba's control-flow graph analysis (`CFGraph`, `ControlFlowAnalysis`), for code written
against numba.cuda that analyses graphs or Python bytecode with it. zymo's own compiler does
not use this module: it lowers the source's structured control flow (`zymo.frontend`).

`CFGraph` is a graph over any hashable nodes: after `set_entry_point` and `process()` (which
drops the nodes the entry cannot reach), it answers dominators, post-dominators, immediate
dominators, the dominator tree, dominance frontiers, back edges, loops, topological order and
the backbone, each computed once when first asked. `ControlFlowAnalysis(ByteCode)` cuts a
function's bytecode into basic blocks (keyed by the offset of their first instruction) and
builds their `CFGraph`.
"""
from __future__ import annotations

import sys
from collections import namedtuple

from ...diagnostics import Diagnostic, Loc
from .errors import UnsupportedError


class Loop(namedtuple("Loop", ("entries", "exits", "header", "body"))):
    """A natural loop: its `header`, the nodes of its `body` (header included), the `entries`
    (outside nodes with an edge into the body) and `exits` (outside nodes the body reaches).
    A graph has one loop per header, so two loops are equal when their headers are."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, Loop) and other.header == self.header

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.header)


class CFGraph:
    """A control-flow graph; edges carry optional data (None when not given)."""

    def __init__(self):
        self._nodes: set = set()
        # insertion-ordered adjacency, so that every traversal is deterministic
        self._succs: dict = {}
        self._preds: dict = {}
        self._edge_data: dict = {}
        self._entry_point = None
        self._dead_nodes: set = set()
        self._cache: dict = {}
        self._processed = False

    # ---- building ------------------------------------------------------------------------
    def add_node(self, node) -> None:
        self._nodes.add(node)
        self._succs.setdefault(node, {})
        self._preds.setdefault(node, {})
        self._processed = False

    def add_edge(self, src, dest, data=None) -> None:
        """Add (or replace: there are no parallel edges) the edge src -> dest."""
        for end in (src, dest):
            if end not in self._nodes:
                raise ValueError(f"cannot add the edge {src!r} -> {dest!r}: add the node "
                                 f"{end!r} first")
        self._succs[src][dest] = None
        self._preds[dest][src] = None
        self._edge_data[src, dest] = data
        self._processed = False

    def set_entry_point(self, node) -> None:
        if node not in self._nodes:
            raise ValueError(f"the entry point {node!r} is not a node of the graph")
        self._entry_point = node

    def process(self) -> None:
        """Drop the nodes the entry point cannot reach (`dead_nodes()`); the properties are
        computed afterwards, on demand."""
        if self._entry_point is None:
            raise RuntimeError("set_entry_point() must come before process()")
        live = set(self._reachable([self._entry_point], self._succs))
        dead = self._nodes - live
        for node in dead:
            for succ in self._succs.pop(node):
                self._preds.get(succ, {}).pop(node, None)
                self._edge_data.pop((node, succ), None)
            for pred in self._preds.pop(node):
                self._succs.get(pred, {}).pop(node, None)
                self._edge_data.pop((pred, node), None)
        self._dead_nodes |= dead
        self._nodes = live
        self._cache.clear()
        self._processed = True

    # ---- plain queries -------------------------------------------------------------------
    def successors(self, src):
        """(node, edge data) pairs of the edges leaving `src`."""
        for dest in self._succs.get(src, ()):
            yield dest, self._edge_data[src, dest]

    def predecessors(self, dest):
        """(node, edge data) pairs of the edges entering `dest`."""
        for src in self._preds.get(dest, ()):
            yield src, self._edge_data[src, dest]

    def entry_point(self):
        if self._entry_point is None:
            raise RuntimeError("the graph has no entry point yet")
        return self._entry_point

    def nodes(self) -> set:
        """The live nodes."""
        return self._nodes

    def dead_nodes(self) -> set:
        """The nodes process() dropped: the entry point cannot reach them."""
        return self._dead_nodes

    def exit_points(self) -> set:
        """The nodes without successors (none in a graph that only loops)."""
        return self._memo("exits", lambda: {n for n in self._nodes if not self._succs[n]})

    # ---- derived properties --------------------------------------------------------------
    def dominators(self) -> dict:
        """{node: the nodes every path from the entry to it passes through (itself too)}."""
        return self._memo("doms", lambda: _dominator_sets(
            self._nodes, {self._entry_point}, self._preds, self._succs))

    def post_dominators(self) -> dict:
        """{node: the nodes every path from it to an exit passes through (itself too)}.
        A loop without exits counts as leaving the graph from each of its nodes, so that the
        nodes of an infinite loop post-dominate only themselves."""
        return self._memo("pdoms", self._post_dominators)

    def immediate_dominators(self) -> dict:
        """{node: its closest strict dominator}; the entry maps to itself."""
        return self._memo("idom", self._immediate_dominators)

    def dominator_tree(self) -> dict:
        """{node: the set of nodes it immediately dominates}."""
        def build():
            tree = {n: set() for n in self.immediate_dominators()}
            for node, idom in self.immediate_dominators().items():
                if node != idom:
                    tree[idom].add(node)
            return tree
        return self._memo("domtree", build)

    def dominance_frontier(self) -> dict:
        """{node: the nodes where its dominance ends}: y is in the frontier of n when n
        dominates a predecessor of y but does not strictly dominate y."""
        return self._memo("df", self._dominance_frontier)

    def descendents(self, node) -> set:
        """The nodes reachable from `node` without following a back edge."""
        def build():
            back, out = self._back_edges(), {}
            for n in reversed(self.topo_order()):
                out[n] = set()
                for succ in self._succs[n]:
                    if (n, succ) not in back:
                        out[n].add(succ)
                        out[n] |= out[succ]
            return out
        return self._memo("descs", build)[node]

    def topo_order(self) -> list:
        """The live nodes in a topological order of the graph without its back edges (the
        reverse of a depth-first post-order)."""
        def build():
            back, order, seen = self._back_edges(), [], {self._entry_point}
            stack = [(self._entry_point, iter(self._succs[self._entry_point]))]
            while stack:
                node, succs = stack[-1]
                for succ in succs:
                    if (node, succ) not in back and succ not in seen:
                        seen.add(succ)
                        stack.append((succ, iter(self._succs[succ])))
                        break
                else:
                    stack.pop()
                    order.append(node)
            return order[::-1]
        return self._memo("topo", build)

    def topo_sort(self, nodes, reverse: bool = False):
        """Iterate over `nodes` in topo_order() (or its reverse)."""
        wanted = set(nodes)
        order = self.topo_order()
        for node in (reversed(order) if reverse else order):
            if node in wanted:
                yield node

    def backbone(self) -> set:
        """The nodes every path from the entry point passes through (the entry included)."""
        return self.post_dominators()[self._entry_point]

    def loops(self) -> dict:
        """{header: Loop} for each natural loop (the back edges into a header merged)."""
        return self._memo("loops", self._find_loops)

    def in_loops(self, node) -> list:
        """The loops containing `node`, innermost first."""
        def build():
            by_size = sorted(self.loops().values(), key=lambda loop: len(loop.body))
            return {n: [loop for loop in by_size if n in loop.body] for n in self._nodes}
        return list(self._memo("in_loops", build).get(node, ()))

    def dump(self, file=None) -> None:
        """Print the adjacency lists and the derived properties."""
        file = file or sys.stdout
        import pprint
        for title, value in (
                ("adjacency lists", {n: sorted(s, key=repr) for n, s in self._succs.items()}),
                ("dominators", self.dominators()), ("post-dominators", self.post_dominators()),
                ("back edges", sorted(self._back_edges(), key=repr)), ("loops", self.loops()),
                ("node-to-loops", {n: [lp.header for lp in self.in_loops(n)]
                                   for n in self._nodes}),
                ("backbone", self.backbone())):
            print(f"CFG {title}:", file=file)
            pprint.pprint(value, stream=file)

    def __eq__(self, other):
        if not isinstance(other, CFGraph):
            return NotImplemented
        return (self._nodes == other._nodes and self._entry_point == other._entry_point
                and self._edge_data == other._edge_data)

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    # ---- algorithms ----------------------------------------------------------------------
    def _memo(self, key, compute):
        if not self._processed:
            raise RuntimeError("call process() after building the graph (set_entry_point() "
                               "first), then ask for its properties")
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @staticmethod
    def _reachable(starts, succs):
        seen, stack = set(), list(starts)
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                yield node
                stack.extend(succs.get(node, ()))

    def _post_dominators(self) -> dict:
        # reverse the graph; nodes of loops with no exit lead to a virtual exit as well
        preds = {n: set(self._succs[n]) for n in self._nodes}
        succs = {n: set(self._preds[n]) for n in self._nodes}
        roots = set(self.exit_points())
        virtual = _VirtualExit()
        stuck = {n for loop in self.loops().values() if not loop.exits for n in loop.body}
        if stuck:
            roots.add(virtual)
            succs[virtual] = stuck
            for n in stuck:
                preds[n].add(virtual)
        if not roots:
            raise RuntimeError("the graph has no exit: post-dominators are undefined")
        pdoms = _dominator_sets(self._nodes | {virtual}, roots, preds, succs)
        pdoms.pop(virtual, None)
        for dom in pdoms.values():
            dom.discard(virtual)
        return pdoms

    def _immediate_dominators(self) -> dict:
        doms = self.dominators()
        idom = {self._entry_point: self._entry_point}
        for node, dom in doms.items():
            strict = dom - {node}
            if strict:
                # the closest strict dominator is the one the others all dominate
                idom[node] = max(strict, key=lambda d: len(doms[d]))
        return idom

    def _dominance_frontier(self) -> dict:
        doms, idom = self.dominators(), self.immediate_dominators()
        frontier = {n: set() for n in idom}
        for node in idom:
            for pred in self._preds[node]:
                runner = pred
                # climb from the predecessor until reaching a strict dominator of node
                while runner == node or runner not in doms[node]:
                    frontier[runner].add(node)
                    if idom[runner] == runner:
                        break
                    runner = idom[runner]
        return frontier

    def _back_edges(self) -> set:
        return self._memo("back", self._find_back_edges)

    def _find_back_edges(self, stats=None) -> set:
        """The edges whose target is on the depth-first search path when they are followed
        (in a reducible graph: the edges whose target dominates their source).
        `stats["iteration_count"]` (where `stats` is a dict) grows by the search's steps: one
        per edge examined and one per node finished."""
        if stats is not None and not isinstance(stats, dict):
            raise TypeError(f"stats must be a dict, not {type(stats).__name__}")
        back, on_path, finished, steps = set(), {self._entry_point}, set(), 0
        stack = [(self._entry_point, iter(self._succs[self._entry_point]))]
        while stack:
            node, succs = stack[-1]
            steps += 1
            succ = next(succs, _DONE)
            if succ is _DONE:
                stack.pop()
                on_path.discard(node)
                finished.add(node)
            elif succ in on_path:
                back.add((node, succ))
            elif succ not in finished:
                on_path.add(succ)
                stack.append((succ, iter(self._succs[succ])))
        if stats is not None:
            stats["iteration_count"] = stats.get("iteration_count", 0) + steps
        return back

    def _find_loops(self) -> dict:
        bodies: dict = {}
        for src, header in self._back_edges():
            body = bodies.setdefault(header, {header})
            # the body: what reaches the back edge's source without passing the header
            stack = [src]
            while stack:
                node = stack.pop()
                if node not in body:
                    body.add(node)
                    stack.extend(self._preds[node])
        loops = {}
        for header, body in bodies.items():
            entries = {p for n in body for p in self._preds[n] if p not in body}
            exits = {s for n in body for s in self._succs[n] if s not in body}
            loops[header] = Loop(entries=entries, exits=exits, header=header, body=body)
        return loops


def _dominator_sets(nodes, roots, preds, succs) -> dict:
    """Dominators by the iterative data-flow equations, from `roots` along `succs`."""
    doms = {n: ({n} if n in roots else set(nodes)) for n in nodes}
    work = [n for n in nodes if n not in roots]
    while work:
        node = work.pop()
        incoming = [doms[p] for p in preds.get(node, ())]
        new = {node} | (set.intersection(*incoming) if incoming else set())
        if new != doms[node]:
            doms[node] = new
            work.extend(s for s in succs.get(node, ()) if s not in roots)
    return doms


class _VirtualExit:
    def __repr__(self):
        return "<virtual exit>"


_DONE = object()


# ---- basic blocks of Python bytecode -----------------------------------------------------

_UNCONDITIONAL = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE",
                            "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT"})
# conditional jumps that leave the tested value on the stack where they jump and pop it
# where they fall through
_JUMP_OR_POP = frozenset({"JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"})


def _is_branch(opname: str) -> bool:
    return opname == "FOR_ITER" or "JUMP_IF" in opname or \
        (opname.startswith("POP_JUMP") and "_IF_" in opname)


class CFBlock:
    """A basic block: `offset` (its first instruction's), `body` (its instructions'
    offsets), `outgoing_jumps` and `incoming_jumps` ({block offset: stack pops on that
    edge}), and `terminating` (it ends the function: return or raise)."""

    def __init__(self, offset: int):
        self.offset = offset
        self.body: list[int] = []
        self.outgoing_jumps: dict[int, int] = {}
        self.incoming_jumps: dict[int, int] = {}
        self.terminating = False

    def __iter__(self):
        return iter(self.body)

    def __repr__(self):
        return (f"block(offset:{self.offset}, outgoing: {sorted(self.outgoing_jumps)}, "
                f"incoming: {sorted(self.incoming_jumps)})")


class ControlFlowAnalysis:
    """The basic blocks of a `ByteCode` and their graph. After `run()`: `blocks`
    ({offset: CFBlock}), `blockseq` (their offsets in code order), `graph` (a processed
    CFGraph over the offsets), `liveblocks` (the blocks the entry reaches) and `backbone`
    (the blocks every path runs, loop blocks left out).

    Only jumps are followed: code with exception handling is refused (UnsupportedError at
    its line), as its dominators would be wrong."""

    def __init__(self, bytecode):
        self.bytecode = bytecode
        self.blocks: dict[int, CFBlock] = {}
        self.blockseq: list[int] = []
        self.liveblocks: dict[int, CFBlock] = {}
        self.graph: CFGraph | None = None
        self.backbone: set | None = None

    def iterblocks(self):
        """All blocks, in code order."""
        return (self.blocks[offset] for offset in self.blockseq)

    def iterliveblocks(self):
        """The live blocks, in code order."""
        return (self.blocks[offset] for offset in self.blockseq if offset in self.liveblocks)

    def incoming_blocks(self, block: CFBlock):
        """(live predecessor block, stack pops) pairs of `block`."""
        for offset, pops in block.incoming_jumps.items():
            if offset in self.liveblocks:
                yield self.blocks[offset], pops

    def dump(self, file=None) -> None:
        self.graph.dump(file)

    def run(self) -> None:
        self._refuse_exception_handling()
        labels = set(self.bytecode.labels)
        block, start_next = None, True
        for inst in self.bytecode:
            if start_next or inst.offset in labels or inst.opname == "FOR_ITER":
                block = self.blocks[inst.offset] = CFBlock(inst.offset)
                self.blockseq.append(inst.offset)
            block.body.append(inst.offset)
            start_next = self._edges(block, inst)
        # a block that neither jumps nor ends the function falls into the next one
        for offset, following in zip(self.blockseq, self.blockseq[1:]):
            here = self.blocks[offset]
            if not here.outgoing_jumps and not here.terminating:
                here.outgoing_jumps[following] = 0

        graph = CFGraph()
        for offset in self.blocks:
            graph.add_node(offset)
        for here in self.blocks.values():
            for target, pops in here.outgoing_jumps.items():
                graph.add_edge(here.offset, target, pops)
                self.blocks[target].incoming_jumps[here.offset] = pops
        graph.set_entry_point(min(self.blocks))
        graph.process()
        self.graph = graph
        self.liveblocks = {offset: self.blocks[offset] for offset in graph.nodes()}
        in_loops = {offset for offset in self.blocks if graph.in_loops(offset)}
        self.backbone = graph.backbone() - in_loops

    def _edges(self, block: CFBlock, inst) -> bool:
        """Record the edges `inst` makes; whether the next instruction starts a block."""
        name = inst.opname
        if inst.is_terminator:
            block.terminating = True
            return True
        if not inst.is_jump:
            return False
        if name in _UNCONDITIONAL:
            block.outgoing_jumps[inst.get_jump_target()] = 0
        elif _is_branch(name):
            block.outgoing_jumps[inst.get_jump_target()] = 0
            block.outgoing_jumps[inst.next] = 1 if name in _JUMP_OR_POP else 0
        else:
            raise self._unsupported(inst, f"the control-flow analysis does not follow {name}")
        return True

    def _refuse_exception_handling(self) -> None:
        entries = getattr(self.bytecode, "exception_entries", ())
        setups = [inst for inst in self.bytecode if inst.opname.startswith("SETUP_")]
        if entries or setups:
            inst = setups[0] if setups else self.bytecode[entries[0].start]
            raise self._unsupported(inst, "the control-flow analysis follows jumps, not "
                                          "exception handling (try, with; from Python 3.12 "
                                          "also comprehensions)")

    def _unsupported(self, inst, message: str) -> UnsupportedError:
        func_id = self.bytecode.func_id
        return UnsupportedError(Diagnostic(
            Loc(func_id.filename, inst.lineno, max(inst.col, 1)), message,
            "analyse a function without try/except, with, generators or await"))
