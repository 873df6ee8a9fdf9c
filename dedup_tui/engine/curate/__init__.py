"""The review's semantics: a reviewer's decisions over the clusters, and what is written from them.

- decisions     the decision log (record, undo, redo) and the overrides it makes
- keep_rules    which document a cluster keeps (longest, first, a field's max or min)
- curated       the curated export: kept records, removed log, decisions log, manifest
- export        writing records and pairs (atomic files, the check of a threshold)
- cluster_table the cluster table written beside an export
- tune          labels and the evidence for choosing a threshold
- audit         a sample of removals to check, and its estimate of wrong removals
- contamination which documents match a reference source (evaluation sets)"""
