"""numba's control-flow analysis (`zymo.cuda.core.controlflow`, `core.bytecode`): graphs built
by hand, checked against what is derived by hand in the comments; the block graph of a small
function's bytecode."""
from __future__ import annotations

import dis
import inspect

import pytest

from zymo.cuda.core.bytecode import ByteCode, FunctionIdentity, _fix_LOAD_GLOBAL_arg
from zymo.cuda.core.controlflow import CFGraph, ControlFlowAnalysis
from zymo.cuda.core.errors import UnsupportedError


def graph(edges, entry, data=None):
    g = CFGraph()
    for node in {n for edge in edges for n in edge} | {entry}:
        g.add_node(node)
    for src, dest in edges:
        g.add_edge(src, dest, (data or {}).get((src, dest)))
    g.set_entry_point(entry)
    g.process()
    return g


# 1 -> 2 -> {3, 4} -> 5 -> {2 (back), 6}; 9 -> 6 cannot be reached from 1
LOOP = [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 2), (5, 6), (9, 6)]
# 0 -> {1, 4}; 1 -> 2 -> 3 -> 1 never leaves; 4 ends the function
STUCK = [(0, 1), (0, 4), (1, 2), (2, 3), (3, 1)]


def test_dead_nodes_and_exits():
    g = graph(LOOP, 1)
    assert g.dead_nodes() == {9}
    assert g.nodes() == {1, 2, 3, 4, 5, 6}
    assert sorted(g.predecessors(6)) == [(5, None)]      # the edge from 9 went with it
    assert g.exit_points() == {6}
    assert graph(STUCK, 0).exit_points() == {4}
    g.add_edge(6, 1)
    with pytest.raises(RuntimeError, match="process"):   # the graph changed since
        g.dominators()


def test_dominators_and_post_dominators():
    g = graph(LOOP, 1)
    assert g.dominators() == {1: {1}, 2: {1, 2}, 3: {1, 2, 3}, 4: {1, 2, 4}, 5: {1, 2, 5},
                              6: {1, 2, 5, 6}}
    assert g.immediate_dominators() == {1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 5}
    assert g.dominator_tree() == {1: {2}, 2: {3, 4, 5}, 3: set(), 4: set(), 5: {6},
                                  6: set()}
    # every path to the exit passes 5 and 6; from 2 it may go through 3 or 4
    assert g.post_dominators() == {1: {1, 2, 5, 6}, 2: {2, 5, 6}, 3: {3, 5, 6},
                                   4: {4, 5, 6}, 5: {5, 6}, 6: {6}}
    assert g.backbone() == {1, 2, 5, 6}
    # 3 and 4 stop dominating at 5; 5 (through the back edge) and 2 itself at 2
    assert g.dominance_frontier() == {1: set(), 2: {2}, 3: {5}, 4: {5}, 5: {2}, 6: set()}


def test_an_infinite_loop_post_dominates_only_itself():
    g = graph(STUCK, 0)
    assert g.post_dominators() == {0: {0}, 1: {1}, 2: {2}, 3: {3}, 4: {4}}
    assert g.backbone() == {0}
    loop = g.loops()[1]
    assert (loop.body, loop.entries, loop.exits) == ({1, 2, 3}, {0}, set())


def test_loops_back_edges_and_order():
    g = graph(LOOP, 1)
    stats = {}
    assert g._find_back_edges(stats=stats) == {(5, 2)}
    assert stats["iteration_count"] == 6 + 7      # one step per live node and per live edge
    loop = g.loops()[2]
    assert list(g.loops()) == [2]
    assert (loop.header, loop.body, loop.entries, loop.exits) == (2, {2, 3, 4, 5}, {1}, {6})
    assert g.in_loops(3) == [loop] and g.in_loops(6) == [] and g.in_loops(1) == []
    order = g.topo_order()
    assert sorted(order) == [1, 2, 3, 4, 5, 6]
    for src, dest in [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6)]:   # no back edge
        assert order.index(src) < order.index(dest)
    assert list(g.topo_sort([6, 3, 1])) == [1, 3, 6]
    assert list(g.topo_sort([6, 3, 1], reverse=True)) == [6, 3, 1]
    assert g.descendents(2) == {3, 4, 5, 6} and g.descendents(5) == {6}


def test_nested_loops_innermost_first():
    # 0 -> 1 -> 2 -> {2 (self loop), 3}; 3 -> {1, 4}
    g = graph([(0, 1), (1, 2), (2, 2), (2, 3), (3, 1), (3, 4)], 0)
    inner, outer = g.loops()[2], g.loops()[1]
    assert inner.body == {2} and outer.body == {1, 2, 3}
    assert g.in_loops(2) == [inner, outer]
    assert g.dominance_frontier()[2] == {1, 2}


def test_equality_and_edge_data():
    one = graph([(0, 1), (0, 2), (1, 3), (2, 3)], 0, {(0, 1): 1})
    same = graph([(2, 3), (1, 3), (0, 2), (0, 1)], 0, {(0, 1): 1})
    assert one == same
    assert one != graph([(0, 1), (0, 2), (1, 3), (2, 3)], 0)
    assert sorted(one.successors(0)) == [(1, 1), (2, None)]
    with pytest.raises(ValueError):
        one.add_edge(0, 7)


def clamped_sum(n):
    s = 0
    i = 0
    while i < n:
        if i > 5:
            break
        s += i
        i += 1
    return s


def _blocks_of_line(cfa, bc, text):
    first = inspect.getsourcelines(clamped_sum)[1]
    line = first + next(k for k, src in enumerate(inspect.getsource(clamped_sum).splitlines())
                        if src.strip() == text)
    starts = sorted(cfa.blocks)
    found = set()
    for inst in bc:
        if inst.lineno == line:
            found.add(max(s for s in starts if s <= inst.offset))
    return found


def test_bytecode_blocks_of_a_function():
    fid = FunctionIdentity.from_function(clamped_sum)
    assert (fid.func_name, fid.arg_names, fid.arg_count) == ("clamped_sum", ("n",), 1)
    bc = ByteCode(func_id=fid)
    decoded = list(dis.get_instructions(clamped_sum))
    # numba's numbering: a NOP at 0, then the code object's instructions 2 bytes further on
    assert [i.offset for i in bc][1:] == [i.offset + 2 for i in decoded]
    for inst, ref in zip(list(bc)[1:], decoded):
        if ref.opname == "LOAD_GLOBAL":
            assert bc.co_names[_fix_LOAD_GLOBAL_arg(inst.arg)] == ref.argval

    cfa = ControlFlowAnalysis(bc)
    cfa.run()
    g = cfa.graph
    assert set(cfa.blockseq) == set(cfa.blocks) and cfa.liveblocks.keys() == g.nodes()
    for inst in bc:
        if inst.is_jump:
            assert inst.get_jump_target() in cfa.blocks
    assert len(g.loops()) == 1
    (loop,) = g.loops().values()
    body = _blocks_of_line(cfa, bc, "s += i")
    assert body and all(g.in_loops(b) == [loop] for b in body)
    assert all(loop.header in g.dominators()[b] for b in body)
    returns = _blocks_of_line(cfa, bc, "return s")
    assert returns and returns <= g.exit_points()
    assert all(g.in_loops(b) == [] for b in returns)
    assert 0 in cfa.backbone and not cfa.backbone & loop.body


def with_handler(x):
    try:
        x = x + 1
    except ValueError:
        x = 0
    return x


def test_exception_handling_is_refused_at_its_line():
    bc = ByteCode(func_id=FunctionIdentity.from_function(with_handler))
    with pytest.raises(UnsupportedError) as info:
        ControlFlowAnalysis(bc).run()
    assert f"{__file__}:" in str(info.value) and "try" in str(info.value)
