"""The shapes and dtypes a benchmark run covers, shared by both adaptive_max_pool3d operators."""

from __future__ import annotations

from typing import Literal

import torch

Shape = tuple[int, ...]
Spatial = tuple[int, int, int]
SizeSet = Literal["tiny", "large", "all"]

# The seed's four input shapes, each pooled to half its spatial size.
TINY: tuple[tuple[Shape, Spatial], ...] = (
    ((1, 1, 8, 8, 8), (4, 4, 4)),
    ((2, 3, 16, 16, 16), (8, 8, 8)),
    ((1, 1, 32, 32, 32), (16, 16, 16)),
    ((2, 8, 8, 8, 8), (4, 4, 4)),
)

# Memory-bound shapes: divisible, global, and non-divisible (overlapping windows) poolings.
LARGE: tuple[tuple[Shape, Spatial], ...] = (
    ((8, 64, 16, 56, 56), (8, 28, 28)),
    ((8, 64, 16, 56, 56), (1, 1, 1)),
    ((8, 64, 16, 56, 56), (7, 7, 7)),
    ((8, 64, 16, 56, 56), (5, 9, 11)),
    ((4, 32, 32, 64, 64), (16, 32, 32)),
    ((4, 32, 32, 64, 64), (10, 20, 20)),
)

# The seed's table order.
DEFAULT_DTYPES: tuple[str, ...] = ("float16", "float32", "bfloat16")

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
DTYPE_ALIASES: dict[str, str] = {
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
    "bf16": "bfloat16",
    "fp64": "float64",
    "double": "float64",
}


def shapes(size_set: SizeSet) -> tuple[tuple[Shape, Spatial], ...]:
    """The (input shape, output size) pairs of a size set."""
    if size_set == "tiny":
        return TINY
    if size_set == "large":
        return LARGE
    if size_set == "all":
        return TINY + LARGE
    raise ValueError(f"unknown size set {size_set!r}; known: tiny, large, all")


def parse_dtypes(names: list[str]) -> list[str]:
    """Canonical dtype names from user input ("fp16,bf16" and "float16 bfloat16" both work).

    Raises ValueError naming the bad entry and the accepted names.
    """
    out: list[str] = []
    for chunk in names:
        for raw in chunk.split(","):
            name = raw.strip().lower()
            if not name:
                continue
            name = DTYPE_ALIASES.get(name, name)
            if name not in DTYPES:
                known = ", ".join([*DTYPES, *DTYPE_ALIASES])
                raise ValueError(f"unknown dtype {raw.strip()!r}; known: {known}")
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("no dtype given")
    return out
