"""numba.misc's kernel-facing names on zymo (`zymo.cuda.misc.special.literal_unroll`)."""
