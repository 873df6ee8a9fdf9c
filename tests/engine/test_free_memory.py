"""The scan gives the memory glibc holds free back to the system between its stages."""

import ctypes
import os
import platform

import pytest

from dedup_tui.engine.scanning import memory


def _resident() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_small_buffers_stop_counting_in_the_resident_size():
    # 160 MB of 4 KB buffers (malloc's, not Python's small-object pool), every 64th kept: the
    # holes between the kept ones cannot be trimmed from the heap's top, so glibc keeps them.
    buffers = [ctypes.create_string_buffer(4096) for _ in range(40_000)]
    for b in buffers:
        ctypes.memset(b, 1, 4096)
    kept = buffers[::64]
    del buffers
    before = _resident()
    memory.release_free_memory()
    assert before - _resident() > 80 << 20
    del kept  # (alive until here)
