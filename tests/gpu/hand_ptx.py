"""PTX written by hand to the `.entry` ABI, to test the driver, arrays and launch layers without
the NVPTX backend, and a way to give a kernel's specialization such PTX."""
from __future__ import annotations

from zymo.runtime.cuda import cache, driver

# y[i * sy] = a * x[i * sx] + y[i * sy] for i < x.shape[0]: strides honoured, in elements
SAXPY = """
.version 7.0
.target sm_70
.address_size 64

.visible .entry saxpy(
    .param .f32 a,
    .param .u64 x, .param .u64 x_n, .param .u64 x_s,
    .param .u64 y, .param .u64 y_n, .param .u64 y_s
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<14>;

    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    cvt.s64.s32 %rd1, %r4;
    ld.param.u64 %rd2, [x_n];
    setp.ge.s64 %p1, %rd1, %rd2;
    @%p1 bra DONE;
    ld.param.f32 %f1, [a];
    ld.param.u64 %rd3, [x];
    ld.param.u64 %rd4, [x_s];
    ld.param.u64 %rd5, [y];
    ld.param.u64 %rd6, [y_s];
    cvta.to.global.u64 %rd11, %rd3;
    cvta.to.global.u64 %rd12, %rd5;
    mul.lo.s64 %rd7, %rd1, %rd4;
    shl.b64 %rd7, %rd7, 2;
    add.s64 %rd8, %rd11, %rd7;
    mul.lo.s64 %rd9, %rd1, %rd6;
    shl.b64 %rd9, %rd9, 2;
    add.s64 %rd10, %rd12, %rd9;
    ld.global.f32 %f2, [%rd8];
    ld.global.f32 %f3, [%rd10];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd10], %f4;
DONE:
    ret;
}
"""


def empty_kernel_ptx(name: str, arrays: int) -> str:
    """A kernel taking `arrays` 1-D arrays (3 parameters each) that does nothing."""
    params = ",\n".join(f"    .param .u64 p{k}" for k in range(3 * arrays))
    return (f".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry {name}(\n"
            f"{params}\n)\n{{\n    ret;\n}}\n")


def give_ptx(kernel, example_args, ptx: str, entry: str):
    """Make `kernel`'s specialization for `example_args` use `ptx` on CUDA."""
    spec = kernel.specialize(*example_args)
    spec.results["cuda"] = cache.with_cubin(kernel.__name__, ptx, entry,
                                            driver.current_device().arch, spec.params)
    return spec
