"""The scan on a Ray cluster, for corpora bigger than one machine (`dedup-tui cluster-scan`),
and a cluster scan's results imported as a project. Imports ray only where it is used.

- settings      ClusterScanSettings and result, the Ray requirement
- address       connecting to a cluster: probing its address, the auth token, init
- pieces        files cut into pieces at line boundaries; reading a piece's records
- stages        the tasks of each stage (ids, exact copies, bands, verification) and their errors
- job           cluster_scan: the driver running the stages, and its scan folder's cleanup
- export        the curated corpus written on the cluster
- scandir       a cluster scan's folder imported as a project
- partial       a project holding a partial view of its corpus (what a local rescan refuses)"""
