"""Text definitions every scan is measured against.

- normalize     text normalisation (lowercase, whitespace collapsed) and exact keys
- shingle       character shingles, their 64-bit fingerprints, batches by length
- exact         exact keys of a batch of texts (the compiled pass when its kernels are ready)
- sets          plain shingle sets and Jaccard: the reference every fast path is tested against
- synth         the walkthrough's synthetic corpus (noisy copies; the shingle-size sweep)"""
