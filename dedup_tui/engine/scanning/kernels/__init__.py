"""Compiled kernels for the scan's hot loops (numba, nogil: the scan runs them from threads),
one module per stage. Importing one imports numba (compile/jit.py): the scan imports them only
when it needs them.

Texts reach the kernels as one UTF-8 buffer with byte offsets (`text.TextBuffer`): about the
size of the text, where code points would take four times that. Every kernel has a plain
version it is tested against (tests/engine/test_kernels.py):

- text           `normalized_buffer` ~ [normalize(t) for t in texts], UTF-8 encoded
- signatures     `signatures` ~ MinHasher.signatures(*shingle.shingle_hashes(texts, k));
                 with (sketch_of, sketches), and `sketch_rows` ~ sketch.sketch_of_set;
                 `sketch_keep` ~ sketch.keep_pairs
- shingles       `shingle_rows` ~ shingle.shingle_sets(texts, k)
- intersections  `intersections` ~ similarity.intersection_sizes (a merge, or bitsets over a
                 shared vocabulary when many pairs share few documents; `Family`: a template
                 family's pairs); `tile_order` ~ a stable argsort of the pairs' tiles
- bands          `band_survivors` ~ lsh.band_candidates, each pair reported in its first band only
                 (a bucket split by sub-bands: its pairs sharing one, in the first they share);
                 the pairs of a later band's bucket it compares ~ those lsh.share_earlier_band
                 leaves
- components     `component_labels` ~ graph.pairs.connected_min_labels; `spanning_forest`;
                 `sorted_unique` ~ np.unique (the candidate keys)
- incremental    `added_band_survivors`: the incremental scan's band pass"""
