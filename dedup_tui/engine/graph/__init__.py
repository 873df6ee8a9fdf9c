"""The pair graph and clusters over it, at any threshold >= the floor, without rescanning.

- pairs         PairGraph (documents and verified pairs as arrays), the policies, spanning forests
- clustering    clusters at a threshold (both policies), reasons, links to the kept documents
- greedy        the greedy policy's keep-first pass (vectorised, and with references first)"""
