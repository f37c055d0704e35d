"""NVIDIA (CUDA): no operator overrides; the generic kernels' heuristics for CUDA devices."""
