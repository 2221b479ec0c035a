import math, sys, numpy as np, zymo as zm
@zm.kernel
def manual(x, counts, y, dx, dy):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        n = counts[i]
        s0 = zm.f32(0.0)
        s1 = zm.f32(0.0)
        s2 = zm.f32(0.0)
        s3 = zm.f32(0.0)
        s4 = zm.f32(0.0)
        s5 = zm.f32(0.0)
        s6 = zm.f32(0.0)
        s7 = zm.f32(0.0)
        s8 = zm.f32(0.0)
        s9 = zm.f32(0.0)
        s10 = zm.f32(0.0)
        s11 = zm.f32(0.0)
        s12 = zm.f32(0.0)
        s13 = zm.f32(0.0)
        s14 = zm.f32(0.0)
        s15 = zm.f32(0.0)
        for _ in range(n):
            s15 = s14
            s14 = s13
            s13 = s12
            s12 = s11
            s11 = s10
            s10 = s9
            s9 = s8
            s8 = s7
            s7 = s6
            s6 = s5
            s5 = s4
            s4 = s3
            s3 = s2
            s2 = s1
            s1 = s0
            s0 = v
            v = v * 0.5 + math.sin(v)
        y[i] = v
        d = dy[i]
        dy[i] = 0.0
        for k in range(n):
            w = s0
            s0 = s1
            s1 = s2
            s2 = s3
            s3 = s4
            s4 = s5
            s5 = s6
            s6 = s7
            s7 = s8
            s8 = s9
            s9 = s10
            s10 = s11
            s11 = s12
            s12 = s13
            s13 = s14
            s14 = s15
            s15 = zm.f32(0.0)
            d = d * (0.5 + math.cos(w))
        dx[i] += d


@zm.kernel
def manual_early(x, counts, y, dx, dy):
    i = zm.grid(1)
    if i < x.shape[0]:
        v = x[i]
        n = counts[i]
        d = dy[i]
        d0 = dx[i]
        s0 = zm.f32(0.0)
        s1 = zm.f32(0.0)
        s2 = zm.f32(0.0)
        s3 = zm.f32(0.0)
        s4 = zm.f32(0.0)
        s5 = zm.f32(0.0)
        s6 = zm.f32(0.0)
        s7 = zm.f32(0.0)
        s8 = zm.f32(0.0)
        s9 = zm.f32(0.0)
        s10 = zm.f32(0.0)
        s11 = zm.f32(0.0)
        s12 = zm.f32(0.0)
        s13 = zm.f32(0.0)
        s14 = zm.f32(0.0)
        s15 = zm.f32(0.0)
        for _ in range(n):
            s15 = s14
            s14 = s13
            s13 = s12
            s12 = s11
            s11 = s10
            s10 = s9
            s9 = s8
            s8 = s7
            s7 = s6
            s6 = s5
            s5 = s4
            s4 = s3
            s3 = s2
            s2 = s1
            s1 = s0
            s0 = v
            v = v * 0.5 + math.sin(v)
        y[i] = v
        dy[i] = 0.0
        for k in range(n):
            w = s0
            s0 = s1
            s1 = s2
            s2 = s3
            s3 = s4
            s4 = s5
            s5 = s6
            s6 = s7
            s7 = s8
            s8 = s9
            s9 = s10
            s10 = s11
            s11 = s12
            s12 = s13
            s13 = s14
            s14 = s15
            s15 = zm.f32(0.0)
            d = d * (0.5 + math.cos(w))
        dx[i] = d0 + d

def main():
    import cupy as cp
    sys.path.insert(0, "tests"); sys.path.insert(0, ".")
    from ad import kernels as K
    nd = 1 << 22
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.uniform(-1, 1, nd).astype(np.float32))
    c = cp.asarray(rng.integers(0, 16, nd).astype(np.int32))
    y = cp.zeros(nd, np.float32); dx = cp.zeros(nd, np.float32); dy = cp.ones(nd, np.float32)
    grid, block = nd // 256, 256
    def t(fn, reps=20):
        fn(); cp.cuda.Device().synchronize()
        a, b = cp.cuda.Event(), cp.cuda.Event(); a.record()
        for _ in range(reps): fn()
        b.record(); b.synchronize(); return cp.cuda.get_elapsed_time(a, b) / reps
    p = t(lambda: K.power_loop[grid, block](x, c, y))
    m = t(lambda: manual[grid, block](x, c, y, dx, dy))
    e = t(lambda: manual_early[grid, block](x, c, y, dx, dy))
    print(f"early loads {e:.3f} ms ({e/p:.2f}x)")
    g = zm.grad(K.power_loop)
    gd = t(lambda: g[grid, block](zm.Duplicated(x, dx), c, zm.Duplicated(y, dy)))
    print(f"primal {p:.3f} ms  manual register stack {m:.3f} ms ({m/p:.2f}x)  zm.grad {gd:.3f} ms ({gd/p:.2f}x)")
main()
