"""The scan's memory cap: its default (a share of the memory available when the scan starts),
sizes as people write them ("3G", "500MB", "2.5 GiB") and as they read them."""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The default cap: this share of the memory available (MemAvailable) when the scan starts.
DEFAULT_SHARE = 0.5
# A cap below this cannot hold a scan's fixed costs (the interpreter, numpy, the kernels).
MIN_CAP = 64 << 20

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


class SizeError(ValueError):
    pass


def parse_size(text: str) -> int:
    """Bytes of a size such as "3G", "500MB", "2.5GiB" or "1048576" (units are powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise SizeError(f"{text!r} is not a size: write a number with K, M, G or T after it, e.g. 4G or 500M")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.lower()])


def format_size(n: float) -> str:
    """A size for people: 1.5 GB, 730 MB, 12 KB (powers of 1024)."""
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def available_memory() -> int:
    """Bytes of memory available to a new allocation (Linux: MemAvailable; elsewhere the
    physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def default_cap() -> int:
    return max(MIN_CAP, int(available_memory() * DEFAULT_SHARE))


def describe_cap(cap: int, chosen: bool) -> str:
    """The line a scan prints first about its cap."""
    if chosen:
        return f"memory cap {format_size(cap)} (--memory)"
    # (the memory the default was taken from, not a second reading that may differ from it)
    available = cap / DEFAULT_SHARE if cap > MIN_CAP else available_memory()
    return (
        f"memory cap {format_size(cap)}: {DEFAULT_SHARE:.0%} of the {format_size(available)} available "
        f"(--memory to change)"
    )


_malloc_trim: Callable[[int], int] | bool | None = None  # (None: not looked up yet; False: none here)


def release_free_memory() -> None:
    """Give the memory the allocator holds free back to the system (glibc's malloc_trim;
    nothing elsewhere). A stage that made and dropped many small buffers (a chunk's texts, a
    band's temporaries) leaves their memory in glibc's heaps, still counted in the process's
    resident size, where the scan's next big arrays may not fit into it: 80 to 160 MB at 1M
    short documents after signing, verification and writing."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if callable(_malloc_trim):
        _malloc_trim(0)


# prctl(2) options: whether the kernel may back this process's memory with transparent huge pages.
_PR_SET_THP_DISABLE, _PR_GET_THP_DISABLE = 41, 42
_prctl: Callable[..., int] | bool | None = None  # (None: not looked up yet; False: none here)


def _thp_switch() -> Callable[..., int] | None:
    global _prctl
    if _prctl is None:
        _prctl = False
        if sys.platform == "linux":
            try:
                prctl = ctypes.CDLL(None, use_errno=True).prctl
                prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
                prctl.restype = ctypes.c_int
                _prctl = prctl
            except (OSError, AttributeError):
                pass
    return _prctl if callable(_prctl) else None


def huge_pages_switchable() -> bool:
    """Whether small_pages can turn transparent huge pages off here."""
    prctl = _thp_switch()
    return prctl is not None and prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0) in (0, 1)


def huge_pages_disabled() -> bool:
    """Whether this process runs with transparent huge pages off (prctl PR_GET_THP_DISABLE)."""
    prctl = _thp_switch()
    return prctl is not None and prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1


@contextmanager
def small_pages() -> Iterator[None]:
    """Transparent huge pages off for the process while the block runs (Linux's
    prctl(PR_SET_THP_DISABLE), restored after; elsewhere, or when refused, nothing changes).

    numpy advises huge pages (madvise) for every array of 4 MB or more, and where they are
    given on request (the usual "madvise" setting) the first touch of such an array may stall
    while the kernel compacts memory to find 2 MB pages. Verification makes hundreds of
    short-lived arrays of millions of pairs each: without huge pages, on the manual pages, its
    system time fell from 0.6-0.9 s to 0.2-0.3 s. Off for the whole command instead (numpy's
    NUMPY_MADVISE_HUGEPAGE=0, read when numpy loads), the write stage, whose big arrays do
    gain from them, took 0.78 s against 0.57 s."""
    prctl = _thp_switch()
    if prctl is None or prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0) != 0 or prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        yield  # (already off, or no switch here)
        return
    try:
        yield
    finally:
        prctl(_PR_SET_THP_DISABLE, 0, 0, 0, 0)


def what_waits_on_disk(cap: float, held: float, signed: float, texts: float) -> tuple[bool, bool]:
    """(whether the texts wait in the spill folder while the candidates are found, whether the
    signatures and sketches wait there too) for a band phase that holds `held` bytes whatever
    spills, `signed` bytes of signatures and sketches and `texts` bytes of normalised texts,
    under `cap` (0: none). The scan decides it from measured bytes (candidates._what_spills), the
    plan's model from estimates (memory_model): one rule, so the two cannot drift apart."""
    if cap <= 0:
        return False, False
    return held + signed + texts > cap, held + signed > cap
