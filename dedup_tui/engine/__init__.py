"""The engine: loading, scanning, clustering, review decisions and export, with no user
interface (the CLI, the app and a notebook call the same functions; README, "The engine as a
library"). Importing this package imports nothing: each module is imported where it is used, so
a small command never pays for numba or pyarrow.

Its modules, by what they do (tests/test_architecture.py checks that they import each other
without cycles and never use each other's underscore names):

- the project file: store/ (schema, migrations, connections and locks, and every SQL
  statement: documents, sources, runs, a scan's pairs, decisions and labels); errors, progress
  (Control: progress callback and cancel), display (corpus text shown literally), outputs
  (which files a command may write)
- the definitions: normalize (text normalisation), sets (plain shingle sets and Jaccard, the
  reference every fast path is tested against), synth (the reference's synthetic corpus)
- reading corpora: readers/ (one module per format, one Record interface), ingest
  (load_corpus: a reader per file, store.documents' writer), exact (exact keys of a batch)
- the scan's arithmetic: shingle, minhash, lsh, similarity, sketch (numpy and plain references),
  kernels (their compiled twins, numba; _jit sets numba up, kernel_cache and warmup compile
  them ahead of a first scan, warmup_job is that separate process)
- the scan: scanning (settings, counters, threads, candidate pairs and exact verification, shared
  by both scans), pipeline (the local scan), incremental (a scan of the documents loaded since
  the last one, equal to a full rescan; incremental_kernels its compiled kernel), ray_scan (the same on a Ray cluster), scandir and
  partial (a cluster scan imported as a project, a partial view of its corpus)
- the review's semantics: cluster (clusters at any threshold, both policies), decisions (the
  reviewer's decisions over them, keep rules, the curated export with its logs), export (writing
  records and pairs), tune (labels and the evidence for a threshold), contamination (which
  documents match a reference source: evaluation sets), ray_export (the curated corpus written
  on a cluster)
"""
