"""Memory traffic and bandwidth: what a kernel must move, how fast it moved it, and the
device's own copy bandwidth to compare with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

INDEX_BYTES = 8  # int64 indices

# The copy that measures the device's bandwidth: large enough to dwarf any L2 (H200: 50 MB).
COPY_BYTES = 1 << 30
MIN_COPY_BYTES = 1 << 26


@dataclass(frozen=True)
class Split:
    """A row's minimum traffic as bytes read and bytes written."""

    read_bytes: int
    write_bytes: int

    @property
    def total(self) -> int:
        return self.read_bytes + self.write_bytes


def forward_split(input_numel: int, output_numel: int, element_size: int) -> Split:
    """The forward reads the input, and writes each output's value and int64 index."""
    return Split(input_numel * element_size, output_numel * (element_size + INDEX_BYTES))


def backward_split(input_numel: int, output_numel: int, element_size: int) -> Split:
    """The backward reads each output's gradient and int64 index, and writes every input's:
    the forward's traffic the other way round."""
    forward = forward_split(input_numel, output_numel, element_size)
    return Split(forward.write_bytes, forward.read_bytes)


def pool3d_traffic_bytes(input_numel: int, output_numel: int, element_size: int) -> int:
    """Minimum traffic of adaptive_max_pool3d and of its backward: input·e + output·(e+8)."""
    return forward_split(input_numel, output_numel, element_size).total


def gbps(traffic_bytes: int, ms: float) -> float:
    """Achieved bandwidth in GB/s (10^9 bytes per second)."""
    if ms <= 0:
        raise ValueError(f"a latency must be positive, got {ms} ms")
    return traffic_bytes / (ms * 1e-3) / 1e9


def copy_bandwidth_gbps(
    device: str, time_ms: Callable[[Callable[[], object]], float], size: int = COPY_BYTES
) -> float:
    """The device's device-to-device copy bandwidth in GB/s (bytes read + written).

    Times `dst.copy_(src)` of `size` bytes with `time_ms`, halving the size when memory is short.
    """
    while True:
        try:
            src = torch.empty(size, dtype=torch.uint8, device=device)
            dst = torch.empty_like(src)
            break
        except RuntimeError:  # torch.OutOfMemoryError, or a vendor plugin's own
            if size // 2 < MIN_COPY_BYTES:
                raise
            size //= 2
    src.fill_(1)
    ms = time_ms(lambda: dst.copy_(src))
    return gbps(2 * size, ms)
