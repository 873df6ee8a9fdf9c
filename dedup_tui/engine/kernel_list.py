"""The compiled kernels a scan calls, each with its argument types, in the order a scan calls
them, under the point of the scan's progress (kernel_cache.ReportEvents) it is first called after:
what the warm-up compiles into the cache, and what a first scan waits for at each
point (warmup.py). Generated from the warm-up's own run on an empty cache; do not edit:
`python -m dedup_tui.engine.warmup_job --record` writes it again (tests/test_warmup checks it
is current). An argument is "int64", "uint8:2d" (a C-contiguous array) or "uint8:1d:ro"
(read-only)."""

EVENTS = (
    'signatures:start',
    'signatures:end',
    'candidates:end',
    'write:start',
    'scanned',
)

KERNELS = (
    ('signatures:start', 'kernels', '_normalize_utf8', 'uint8:1d:ro int64:1d int32:1d bool:1d uint8:1d int64:1d bool:1d'),
    ('signatures:start', 'kernels', '_splice', 'uint8:1d int64:1d bool:1d uint8:1d:ro int64:1d uint8:1d int64:1d'),
    ('signatures:start', 'kernels', '_signatures', 'uint8:1d int64:1d int64:1d int64 uint32:1d uint32:1d uint32:2d int64:1d uint8:2d'),
    ('signatures:end', 'kernels', 'band_survivors', 'int64:1d int64:1d int64:1d uint64:2d int64 int64 uint32:2d uint16:2d int64 int64 int8:1d int64 int64:1d int64:1d'),
    ('signatures:end', 'kernels', '_sketch_keep_words', 'int64:1d int64:1d int64:1d uint64:2d int64:1d bool:1d'),
    ('candidates:end', 'kernels', 'component_labels', 'int64 int64:1d int64:1d'),
    ('candidates:end', 'kernels', 'order_by_label', 'int64:1d int64:1d'),
    ('candidates:end', 'kernels', '_packed_fingerprints', 'uint8:1d int64:1d int64:1d int64 int64 int64:1d int64'),
    ('candidates:end', 'kernels', '_split_sorted_keys', 'uint64:1d int64 int64'),
    ('candidates:end', 'kernels', 'merge_intersections', 'uint64:1d int64:1d int64:1d int64:1d int64:1d'),
    ('candidates:end', 'kernels', '_top_byte_counts', 'uint64:1d'),
    ('candidates:end', 'kernels', '_scatter_by_top_byte', 'uint64:1d uint64:1d int64:1d'),
    ('candidates:end', 'kernels', '_shared_fingerprints', 'uint64:1d'),
    ('candidates:end', 'kernels', '_fill_shared_bits', 'uint64:1d uint64:2d int64'),
    ('candidates:end', 'kernels', '_accumulate_bitset_intersections', 'uint64:2d int64:1d int64:1d int64:1d'),
    ('write:start', 'kernels', '_kruskal', 'int64 int64:1d int64:1d int64:1d'),
    ('scanned', 'kernels', '_count_rare_shared', 'uint64:1d int64 int64:1d int64:1d int64:1d int64:1d'),
    ('scanned', 'incremental_kernels', 'added_band_survivors', 'int64:1d int64:1d int64:1d int64:1d uint64:2d int64 int64 int32:2d bool:2d int64 int64 int64:1d int64:1d'),
    ('scanned', 'kernels', 'sketch_rows', 'uint64:1d int64:1d int64:1d uint8:2d'),
)
