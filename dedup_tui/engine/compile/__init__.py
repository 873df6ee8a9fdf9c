"""Compiling the scan's kernels: numba set-up, the on-disk cache, and the warm-up that fills it
ahead of a first scan. Nothing here but jit imports numba.

- jit           numba set-up: the cache folder, the @kernel and @helper decorators
- kernel_cache  the cache folder and the warm-up's stamp, lock and ready files (numba-free)
- warmup        starting the warm-up early, and a first scan waiting for its kernels
- warmup_job    the warm-up process itself (python -m dedup_tui.engine.compile.warmup_job)
- kernel_list   what the warm-up compiles, in scan order (generated: warmup_job --record)"""
