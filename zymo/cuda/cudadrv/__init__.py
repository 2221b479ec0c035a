"""numba's `cuda.cudadrv` modules as far as users name them: `driver` (errors, streams,
events), `devicearray` (DeviceNDArray), `devices` (the current device)."""
