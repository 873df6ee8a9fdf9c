"""The scan: exact groups, candidate pairs and their exact verification, written to the project.

- settings      ScanSettings and defaults, counters, the kernels' thread pool (shared with ray/)
- minhash       MinHash permutations and signatures (numpy; the plain version)
- lsh           banding: bands x rows for a floor, band keys, candidate pairs (numpy; the plain version)
- sketch        bit sketches of long texts: a cheap test before exact verification
- similarity    exact Jaccard of pairs, every pair of a small corpus (numpy)
- verify        exact verification of candidate pairs, component by component
- candidates    the local scan's pairs: exhaustive, or LSH candidates then verify
- memory        the memory cap: its default, sizes parsed and shown
- passes        under the cap: candidates spilled and verified in passes, pairs spilled, the memory model
- ahead         signing documents while they load (the scan that follows starts from them)
- local         the scan of a project on this machine (scan, find_pairs, last_scan_settings)
- incremental   the scan of the documents loaded since the last scan (equal to a full rescan),
                and what it reuses of the last one
- kernels/      the compiled twins of the above, one module per stage (numba)"""
