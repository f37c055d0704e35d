"""What an operator benchmark is: cases, the prepared callables of one case, and discovery.

An operator's benchmark definition is the module `kernels.registry` names for it (usually
`kernels.benchmark.<op>`), holding `BENCHMARK`, an `OpBenchmark`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernels import registry
from kernels.benchmark.bandwidth import Split
from kernels.benchmark.sizes import DTYPES, Shape, Spatial

# The operators that have a benchmark definition, in the registry's order.
KNOWN_OPS: tuple[str, ...] = tuple(op.name for op in registry.OPERATORS if op.benchmark)


class KernelMismatch(Exception):
    """The kernel's result differs from the reference: the case must not be timed."""


@dataclass(frozen=True)
class Case:
    """One row of the table: a dtype and an input shape pooled to an output size."""

    dtype: str
    size: Shape
    output_size: Spatial

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def label(self) -> str:
        size = ", ".join(map(str, self.size))
        out = ", ".join(map(str, self.output_size))
        return f"{self.dtype} ({size}) → ({out})"


@dataclass(frozen=True)
class Prepared:
    """A case made ready on a device: both callables work on the same inputs.

    `verify` runs both once and raises `KernelMismatch` when the kernel's result is wrong;
    `split` is the operator's minimum memory traffic on this case, read and written.
    """

    reference: Callable[[], Any]
    kernel: Callable[[], Any]
    verify: Callable[[], None]
    split: Split

    @property
    def traffic_bytes(self) -> int:
        return self.split.total


# prepare(case, device, kernel function) -> Prepared
Prepare = Callable[[Case, str, Callable[..., Any]], Prepared]


@dataclass(frozen=True)
class OpBenchmark:
    """An operator's benchmark: its name and how to prepare a case."""

    name: str
    prepare: Prepare


def load(op: str) -> OpBenchmark:
    """The benchmark definition of `op`; ValueError naming the known operators otherwise."""
    if op not in KNOWN_OPS:
        raise ValueError(f"no benchmark for operator {op!r}; known: {', '.join(KNOWN_OPS)}")
    module = importlib.import_module(str(registry.operator(op).benchmark))
    bench: OpBenchmark = module.BENCHMARK
    return bench


def describe_mismatch(
    got: torch.Tensor, want: torch.Tensor, what: str, allowed: torch.Tensor | None = None
) -> str:
    """A short account of how two same-shaped tensors differ: how many elements are off and
    the worst one (largest difference, or largest difference over `allowed` when given)."""
    # On the host: some devices (MUSA) have no float64.
    got, want = got.detach().cpu(), want.detach().cpu()
    diff = (got.double() - want.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    if allowed is None:
        bad = diff > 0
        score = diff
    else:
        bad = diff > allowed
        allowed = allowed.detach().cpu()
        score = diff / allowed.double().clamp_min(torch.finfo(torch.float64).tiny)
    flat = int(score.flatten().argmax())
    pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape))
    text = (
        f"{what}: {int(bad.sum())} of {got.numel()} elements differ; worst at {pos}: "
        f"kernel {float(got.flatten()[flat]):.6g}, reference {float(want.flatten()[flat]):.6g}"
    )
    if allowed is not None:
        text += f", allowed difference {float(allowed.flatten()[flat]):.3g}"
    return text


def check_layout(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Raise KernelMismatch when shape or dtype differ."""
    if got.shape != want.shape:
        raise KernelMismatch(f"{what}: shape {tuple(got.shape)}, reference {tuple(want.shape)}")
    if got.dtype != want.dtype:
        raise KernelMismatch(f"{what}: dtype {got.dtype}, reference {want.dtype}")
