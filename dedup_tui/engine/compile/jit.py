"""numba set-up for the engine's compiled kernels: a cache directory that always works, and
the decorator every kernel uses.

numba caches compiled kernels next to their module when that folder is writable, which it is
not in a read-only site-packages; with no writable place at all, `cache=True` fails at import
("no locator available"). So, unless the user chose NUMBA_CACHE_DIR, kernels are cached under
the user's cache folder (or a per-user temporary folder), and when no folder is writable they
are compiled without a cache: a missing cache costs time, never an error. A folder another
user could write into is never used (numba loads pickles from it: kernel_cache.cache_dir), and
a cache that cannot be written (a full disk) is left for the rest of the process, said once.

A fresh cache is filled ahead of a scan by a separate process (warmup.py).
"""

from __future__ import annotations

import os
import sys

from .kernel_cache import cache_dir, notice  # (numba-free: the warm-up's parent process needs it too)

CACHE_DIR = cache_dir()
if CACHE_DIR and not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = CACHE_DIR

import numba  # noqa: E402  (after NUMBA_CACHE_DIR is set: numba reads it at import)


def _numba_arraymath_without_scipy() -> None:
    """numba's arraymath, imported when the first kernel loads, asks scipy for a BLAS (only
    numba's np.convolve and np.correlate use one; no kernel here calls them): where scipy is
    installed, importing scipy.linalg took 0.2-0.3 s of every process that loads a kernel (a
    sixth of `dedup-tui scan`'s time to loaded on the manual pages). It is imported here with
    that one import failing; scipy imports normally afterwards."""
    blas = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" in sys.modules or blas in sys.modules or "scipy.linalg" in sys.modules:
        return
    sys.modules[blas] = None  # type: ignore[assignment]  # (None: `import` raises ImportError)
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if sys.modules.get(blas, 0) is None:
            del sys.modules[blas]


_numba_arraymath_without_scipy()

from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.core.caching import FunctionCache  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

if CACHE_DIR:
    # numba may have been imported before us (then it read the environment already).
    numba.config.CACHE_DIR = CACHE_DIR  # type: ignore[attr-defined]


_write_error: list[OSError] = []


def cache_write_error() -> OSError | None:
    """Why this process stopped writing compiled kernels to the cache (None: it has not)."""
    return _write_error[0] if _write_error else None


class _KernelCache(FunctionCache):
    """numba's cache of one kernel, which stops writing, for the whole process, at the first
    error (ENOSPC: the disk under the cache is full), saying so once: the kernel is compiled
    in this process all the same."""

    def save_overload(self, sig, data):
        if _write_error:
            return
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            _write_error.append(exc)
            notice(
                f"cannot write compiled kernels to the cache {CACHE_DIR}: {exc.strerror or exc}; "
                f"compiling them in this process without caching them"
            )


def _njit(fn, **options):
    dispatcher = numba.njit(cache=False, **options)(fn)
    if CACHE_DIR:
        try:  # (what cache=True does, with numba's FunctionCache)
            dispatcher._cache = _KernelCache(dispatcher.py_func)
        except Exception:  # noqa: BLE001 - e.g. "no locator available": compile without a cache instead
            pass
    return dispatcher


def kernel(fn):
    """njit with nogil (the scan runs kernels from threads), cached when a cache folder works."""
    return _njit(fn, nogil=True, no_cfunc_wrapper=True)


def helper(fn):
    """A kernel called only by other kernels: compiled without the wrapper Python calls it through."""
    return _njit(fn, nogil=True, no_cfunc_wrapper=True, no_cpython_wrapper=True)


@intrinsic
def popcount64(typingctx, x):
    """Number of set bits of a uint64 (LLVM's ctpop: one instruction where the CPU has it)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.uint64)
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [value])

    return types.uint64(x), codegen
