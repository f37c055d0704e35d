"""The mover that measures a row's reach: it must read and write every byte it is asked to,
in both layouts, whichever side is larger; the reach is the fastest of its layouts."""

from __future__ import annotations

import pytest
import torch

from kernels import runtime
from kernels.benchmark.bandwidth import (
    Split,
    backward_split,
    forward_split,
    pool3d_traffic_bytes,
)
from kernels.benchmark.reach import NEVER, WORD, MoverConfig, fastest, mover

BLOCK = 16


def _blocks(words: torch.Tensor) -> list[tuple[int, ...]]:
    padded = torch.zeros(-(-words.numel() // BLOCK) * BLOCK, dtype=words.dtype)
    padded[: words.numel()] = words.cpu()
    return [tuple(row.tolist()) for row in padded.view(-1, BLOCK)]


@pytest.mark.parametrize("spread", [False, True], ids=["front", "spread"])
def test_write_heavy_mover_writes_every_word_once(spread: bool) -> None:
    move = mover(Split(read_bytes=3 * BLOCK * WORD + 8, write_bytes=10 * BLOCK * WORD - 4),
                 MoverConfig(BLOCK, 1, spread), runtime.device)  # fmt: skip
    move.destination.fill_(-1)
    move()
    written = _blocks(move.destination)
    source = _blocks(move.source)
    assert (move.destination != -1).all(), "a destination word was not written"
    # Each source block lands in the destination exactly once; the other blocks are zeros.
    landed = [block for block in written if any(block)]
    assert sorted(landed) == sorted(b for b in source if any(b))
    assert len(written) - len(landed) == len(written) - len(source)


@pytest.mark.parametrize("spread", [False, True], ids=["front", "spread"])
def test_read_heavy_mover_reads_what_it_does_not_write(spread: bool) -> None:
    """The programs that only read still load their block: a NEVER planted in block 6 (read
    by a program that writes nothing, in both layouts) reaches the sink."""
    move = mover(Split(read_bytes=9 * BLOCK * WORD, write_bytes=2 * BLOCK * WORD),
                 MoverConfig(BLOCK, 1, spread), runtime.device)  # fmt: skip
    sink = move.sink
    sink.fill_(0)
    move()
    assert int(sink.item()) == 0, "NEVER was in the random source"
    move.source[6 * BLOCK + 3] = NEVER
    move()
    assert int(sink.item()) == NEVER
    assert all(block in _blocks(move.source) for block in _blocks(move.destination))


def test_splits_add_up_to_the_minimum_traffic() -> None:
    for split in (forward_split, backward_split):
        got = split(25_690_112, 175_616, 2)
        assert got.read_bytes + got.write_bytes == pool3d_traffic_bytes(25_690_112, 175_616, 2)
    assert forward_split(1000, 10, 4) == Split(4000, 120)
    assert backward_split(1000, 10, 4) == Split(120, 4000)


def test_the_reach_is_the_fastest_layout_timed() -> None:
    """Every layout is timed once on the row's buffers, and the least time wins, with its
    name."""
    layouts = [MoverConfig(BLOCK, 1, False), MoverConfig(2 * BLOCK, 1, True)]
    seen: list[tuple[int, int]] = []

    def time_ms(move: object) -> float:
        move()  # type: ignore[operator]
        source, destination = move.source, move.destination  # type: ignore[attr-defined]
        seen.append((source.numel(), destination.numel()))
        return 2.0 if len(seen) == 1 else 1.5

    split = Split(read_bytes=5 * BLOCK * WORD, write_bytes=3 * BLOCK * WORD)
    assert fastest(split, runtime.device, time_ms, layouts) == (1.5, "spread32-w1")
    assert seen == [(5 * BLOCK, 3 * BLOCK)] * 2  # both movers moved the row's words
    with pytest.raises(ValueError, match="no mover layout"):
        fastest(split, runtime.device, time_ms, [])
