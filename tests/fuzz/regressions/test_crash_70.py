"""Fuzzer regression (crash, seed 70): AttributeError: 'float' object has no attribute 'astype' [at fold.py:85 fold_constants; arith.py:22 rule; math.py:120 <lambda>]

Found by `python -m zymo.fuzz`; shrunk. Fixed: erf's interp rule returns an array for 0-d operands."""
from __future__ import annotations

import math  # noqa: F401  (the kernel may call math.*)

import zymo as zm
from zymo.fuzz.regression import program_from_json
from zymo.fuzz.run import check_kernel

PROGRAM = program_from_json('{"seed":70,"blocks":2,"threads":32,"arrays":[{"name":"x1","dtype":"f64","length":69,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"x2","dtype":"f32","length":64,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"n3","dtype":"u32","length":64,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"y4","dtype":"f64","length":64,"role":"out","base":null,"start":0,"step":1,"base_length":0},{"name":"y5","dtype":"i64","length":64,"role":"out","base":null,"start":0,"step":1,"base_length":0},{"name":"y6","dtype":"bool","length":64,"role":"out","base":null,"start":0,"step":1,"base_length":0},{"name":"cnt17","dtype":"i32","length":1,"role":"counter","base":null,"start":0,"step":1,"base_length":0},{"name":"slots18","dtype":"i64","length":64,"role":"slots","base":null,"start":0,"step":1,"base_length":0},{"name":"cnt19","dtype":"u64","length":1,"role":"counter","base":null,"start":0,"step":1,"base_length":0},{"name":"slots20","dtype":"u8","length":64,"role":"slots","base":null,"start":0,"step":1,"base_length":0}],"scalars":[["nn","i32",0]],"params":[],"grad":false,"transcendental":true}')


@zm.kernel
def kern():
    g = zm.grid(1)
    t = zm.threadIdx.x
    b = zm.blockIdx.x
    lane = zm.laneid
    loc22 = zm.local.array(4, zm.f64)
    for q_ in range(4):
        loc22[q_] = zm.f64(0.0)
    loc22[(zm.i32(1)) % 4] = math.erf(zm.f64(1.0))
    v7 = loc22[(zm.i32(1)) % 4]


def test_crash_70():
    outcome = check_kernel(kern, PROGRAM, backends=('interp', 'cpu'), grad=False)
    assert outcome.status != "rejected", outcome.note
    assert not outcome.findings, "\n".join(f.kind + ": " + f.message for f in outcome.findings)
