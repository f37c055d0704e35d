"""A row's reach: the least time any kernel could take for its memory traffic, measured.

A row of either operator must read some bytes and write others (`bandwidth.Split`). A mover
is one launch that does only that: it reads `read_bytes` and writes `write_bytes` as
contiguous 32-bit words, nothing computed beyond what keeps the reads alive. Timed with the
benchmark's own timer over a few layouts and block sizes, the fastest is what a perfect kernel
for that row would take under the same timer: the row's reach (`python -m kernels.benchmark
--reach`, and `tools/bar_bounds.py` for the bars).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

from kernels.benchmark.bandwidth import Split

WORD = 4  # bytes in the int32 words the mover reads and writes
# The mover's source never holds this value (`mover` fills it below), so the store that keeps
# read-only programs' loads alive never runs.
NEVER = 2**31 - 1
_NEVER = tl.constexpr(NEVER)


@dataclass(frozen=True)
class MoverConfig:
    """One way to lay the traffic over a launch.

    `spread`: one program per block of the larger side; the smaller side's blocks are spread
    evenly over the grid (reads and writes mixed throughout). Otherwise program p reads block
    p and writes block p, so the smaller side is all done by the first programs.
    """

    block: int  # words a program moves on each side
    warps: int
    spread: bool

    @property
    def name(self) -> str:
        return f"{'spread' if self.spread else 'front'}{self.block}-w{self.warps}"


CONFIGS: tuple[MoverConfig, ...] = tuple(
    MoverConfig(block, warps, spread)
    for spread in (False, True)
    for block in (1024, 2048, 4096, 8192, 16384)
    for warps in (4, 8)
)


@triton.jit
def _move(
    src,
    dst,
    sink,
    n_src,
    n_dst,
    src_blocks,
    dst_blocks,
    grid,
    BLOCK: tl.constexpr,
    SPREAD: tl.constexpr,
):
    p = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if SPREAD:
        read_block = p * src_blocks // grid
        reads = (p + 1) * src_blocks // grid > read_block
        write_block = p * dst_blocks // grid
        writes = (p + 1) * dst_blocks // grid > write_block
    else:
        read_block = p
        reads = p < src_blocks
        write_block = p
        writes = p < dst_blocks
    at = read_block * BLOCK + offs
    words = tl.load(src + at, mask=at < tl.where(reads, n_src, 0), other=0)
    if writes:
        at = write_block * BLOCK + offs
        tl.store(dst + at, words, mask=at < n_dst)
    else:
        top = tl.max(words, axis=0)
        if top == _NEVER:
            tl.store(sink, top)


def _words(nbytes: int) -> int:
    return max(1, -(-nbytes // WORD))


@dataclass
class Mover:
    """One launch that reads `source` whole and writes `destination` whole.

    Where a program writes, it stores the words it read (zeros past the source's end); a
    program that only reads keeps its loads alive with a maximum and a store that the data
    never triggers."""

    source: torch.Tensor
    destination: torch.Tensor
    config: MoverConfig
    sink: torch.Tensor = field(init=False)  # where a read-only program's NEVER would land

    def __post_init__(self) -> None:
        self.sink = torch.empty(1, dtype=torch.int32, device=self.source.device)
        self._src_blocks = triton.cdiv(self.source.numel(), self.config.block)
        self._dst_blocks = triton.cdiv(self.destination.numel(), self.config.block)
        self._grid = max(self._src_blocks, self._dst_blocks)

    def __call__(self) -> None:
        _move[(self._grid,)](
            self.source,
            self.destination,
            self.sink,
            self.source.numel(),
            self.destination.numel(),
            self._src_blocks,
            self._dst_blocks,
            self._grid,
            BLOCK=self.config.block,
            SPREAD=self.config.spread,
            num_warps=self.config.warps,
        )


def mover(split: Split, config: MoverConfig, device: str) -> Mover:
    """A `Mover` for `split`'s bytes (rounded up to whole words) on `device`."""
    source = torch.randint(0, NEVER, (_words(split.read_bytes),), dtype=torch.int32, device=device)
    destination = torch.empty(_words(split.write_bytes), dtype=torch.int32, device=device)
    return Mover(source, destination, config)


def fastest(
    split: Split,
    device: str,
    time_ms: Callable[[Callable[[], Any]], float],
    configs: Sequence[MoverConfig] = CONFIGS,
) -> tuple[float, str]:
    """The row's reach: the least `time_ms` of a mover of `split` over `configs` (all of them
    moving the same buffers), and the name of the layout that took it."""
    if not configs:
        raise ValueError("no mover layout to time")
    first = mover(split, configs[0], device)
    times = {
        config.name: float(time_ms(Mover(first.source, first.destination, config)))
        for config in configs
    }
    name = min(times, key=times.__getitem__)
    return times[name], name
