"""Fuzzer regression (crash-grad, seed 20004): KeyError: <result 0 of arith.constant : u64> [at control.py:161 _for_interp; driver.py:221 run_region; driver.py:239 _evaluate]

Found by `python -m zymo.fuzz` on an H100 (the crash is the CPU's too); shrunk. Fixed: a loop
slice replayed by the reverse sweep yields carried values defined outside the loop (folded
constants) through their reverse-sweep values."""
from __future__ import annotations

import math  # noqa: F401  (the kernel may call math.*)

import zymo as zm
from zymo.fuzz.regression import program_from_json
from zymo.fuzz.run import check_kernel

PROGRAM = program_from_json('{"seed":20004,"blocks":1,"threads":32,"arrays":[{"name":"x1","dtype":"f64","length":37,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"x2","dtype":"f64","length":32,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"n3","dtype":"u8","length":32,"role":"in","base":null,"start":0,"step":1,"base_length":0},{"name":"x4","dtype":"f64","length":32,"role":"in","base":null,"start":0,"step":2,"base_length":0},{"name":"acc18","dtype":"f64","length":4,"role":"acc","base":null,"start":0,"step":1,"base_length":0}],"scalars":[["nn","i32",3]],"params":["x1","x2","n3","x4","acc18"],"grad":true,"transcendental":true}')


@zm.kernel
def kern(x1, x2, n3, x4, acc18):
    g = zm.grid(1)
    t = zm.threadIdx.x
    b = zm.blockIdx.x
    lane = zm.laneid
    loc15 = zm.local.array(4, zm.f64)
    for q_ in range(4):
        loc15[q_] = zm.f64(0.0)
    v7 = zm.f64(x4[(lane) % 32])
    v8 = zm.f64(x4[g])
    v9 = zm.f64(x2[(g + 6) % 32])
    v10 = zm.bool_((not (lane < t)))
    v11 = zm.u64(zm.u64(16))
    v12 = zm.i64(zm.i64(1))
    v13 = zm.i16(zm.i16(g))
    v14 = zm.i32(zm.i32(2))
    w16 = 0
    while w16 < 2:
        w16 += 1
        for k17 in range(2):
            zm.atomic.sub(acc18, ((zm.i32(7) ^ zm.i32(n3[(g + 2) % 32]))) % 4, math.sin(zm.fma(v9, (zm.f64(1.0) * v9), (v9 / (1.0 + x1[((zm.i32(n3[g]) % zm.i32(n3[((v14 % v14)) % 32]))) % 37] * x1[((zm.i32(n3[g]) % zm.i32(n3[((v14 % v14)) % 32]))) % 37])))))
            if ((zm.i64(g) != v12) or (v14 != zm.i32(-1))):
                break
            if (v14 <= v14 < zm.i32(n3[(g + 10) % 32])):
                pass
            else:
                v11 = zm.u64(b)
        v11 = (v11 * zm.u64(0))


def test_crash_grad_20004():
    outcome = check_kernel(kern, PROGRAM, backends=('interp', 'cpu'), grad=True)
    assert outcome.status != "rejected", outcome.note
    assert not outcome.findings, "\n".join(f.kind + ": " + f.message for f in outcome.findings)
