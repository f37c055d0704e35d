"""The lab: probes, sweeps and checkers run by hand on a GPU, beside the product.

Not an installed package (pyproject lists the product's packages only); run from the
repository root as `python -m tools.<name>`. Tools may import `kernels`; `kernels` never
imports `tools`.
"""
