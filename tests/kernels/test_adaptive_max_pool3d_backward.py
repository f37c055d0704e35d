"""Accuracy of adaptive_max_pool3d_backward (generic and Moore Threads) against PyTorch in float64.

Both implementations run on every device: the Moore Threads one through
`runtime.function(op, "mthreads")`, which forces the mthreads vendor for the call.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels import runtime
from kernels.ops._adaptive import PlanCache, max_window, window_end, window_start
from kernels.ops.adaptive_max_pool3d_backward import BackwardConfig
from tests.kernels.support import (
    ALL_DTYPES,
    BIG_OUTPUT,
    BIG_SHAPE,
    BIG_WINDOW_D,
    DEVICE,
    HALF_DTYPES,
    ON_GPU,
    UPSTREAM_OUTPUTS,
    UPSTREAM_SHAPES,
    assert_backward_matches,
    big_memory_gpu,
    randn,
    reference_forward,
    seeded,
)

pytestmark = pytest.mark.adaptive_max_pool3d_backward

OP = "adaptive_max_pool3d_backward"
IMPLS = ["generic", "mthreads"]
MTHREADS_LOG = "KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD"
REPO = Path(__file__).resolve().parents[2]


def backward(impl: str) -> Callable[..., torch.Tensor]:
    return runtime.function(OP, impl)


def case(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, *key: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random input, its reference argmax indices, and a random gradient, on the device."""
    gen = seeded(shape, output_size, dtype, *key)
    x = randn(shape, dtype, gen)
    _, indices = reference_forward(x, output_size)
    grad = randn(tuple(indices.shape), dtype, gen)
    return grad, x, indices.to(DEVICE)


def dtypes_of(impl: str) -> list[torch.dtype]:
    return ALL_DTYPES if impl == "generic" else HALF_DTYPES


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("output_size", UPSTREAM_OUTPUTS, ids=str)
@pytest.mark.parametrize("shape", UPSTREAM_SHAPES, ids=str)
def test_upstream_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, impl: str
) -> None:
    # float64 on mthreads checks the fallback to the generic op (MUSA has no float64).
    grad, x, indices = case(shape, output_size, dtype)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


OTHER_CASES = [
    ((2, 3, 5, 9, 13), (2, 4, 5)),  # non-cubic, nothing divides
    ((1, 2, 6, 4, 11), (4, 7, 3)),  # upsampling along H
    ((1, 1, 3, 2, 5), (7, 5, 9)),  # upsampling on every axis: several windows per element
    ((2, 2, 4, 6, 8), (2, 3, 4)),  # divisible, non-cubic windows (2, 2, 2)
    ((1, 3, 6, 9, 12), (2, 3, 3)),  # divisible, windows (3, 3, 4)
    ((1, 1, 4, 70, 300), (2, 3, 2)),  # rows wider than one tile
    ((3, 6, 7, 8), (2, 3, 4)),  # unbatched (C, D, H, W)
    ((2, 4, 6, 8), (2, 3, 4)),  # unbatched, divisible
    ((1, 2, 8, 64, 72), (4, 16, 18)),  # divisible, past SMALL_INPUT: the disjoint kernel
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "output_size"), OTHER_CASES, ids=str)
def test_other_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, impl: str
) -> None:
    grad, x, indices = case(shape, output_size, dtype)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("output_size", [(3, 4, 4), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_channels_last_3d_input(
    dtype: torch.dtype, output_size: tuple[int, int, int], impl: str
) -> None:
    grad, x, indices = case((2, 5, 6, 6, 9), output_size, dtype, "cl")
    x = x.to(memory_format=torch.channels_last_3d)
    got = backward(impl)(grad, x, indices)
    assert_backward_matches(got, grad, x, indices)
    want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert got.stride() == want.stride(), "grad_input memory format differs from PyTorch's"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("output_size", [(3, 4, 5), (2, 2, 4)], ids=str)
def test_non_contiguous_grad_and_indices(output_size: tuple[int, int, int], impl: str) -> None:
    grad, x, indices = case((2, 3, 6, 8, 12), output_size, torch.float32, "strided")
    # Same values, other strides: transposed copies and an expanded (stride 0) channel.
    grad_t = grad.transpose(2, 4).contiguous().transpose(2, 4)
    indices_t = indices.permute(0, 1, 3, 2, 4).contiguous().permute(0, 1, 3, 2, 4)
    assert not grad_t.is_contiguous() and not indices_t.is_contiguous()
    assert_backward_matches(backward(impl)(grad_t, x, indices_t), grad, x, indices)
    grad_e = grad[:, :1].expand(-1, 3, -1, -1, -1)
    indices_e = indices[:, :1].expand(-1, 3, -1, -1, -1)
    # The reference gets contiguous copies: PyTorch's CPU kernel misreads stride-0 indices.
    got = backward(impl)(grad_e, x, indices_e)
    assert_backward_matches(got, grad_e.contiguous(), x, indices_e.contiguous())


@pytest.mark.parametrize("impl", IMPLS)
def test_non_contiguous_input(impl: str) -> None:
    base = randn((2, 4, 9, 12, 10), torch.float32, seeded("strided input"))
    x = base.transpose(2, 4)[:, 1:, ::2]
    _, indices = reference_forward(x, (3, 2, 4))
    grad = randn(tuple(indices.shape), torch.float32, seeded("strided grad"))
    indices = indices.to(DEVICE)
    got = backward(impl)(grad, x, indices)
    assert_backward_matches(got, grad, x, indices)
    want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert got.stride() == want.stride()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((0, 2, 4, 4, 4), (2, 2, 2)), ((0, 4, 4, 4), (3, 3, 3)), ((1, 2, 4, 5, 6), (0, 2, 2))],
    ids=str,
)
def test_empty(shape: tuple[int, ...], output_size: tuple[int, int, int], impl: str) -> None:
    x = torch.randn(shape).to(DEVICE)
    indices = torch.zeros((*shape[:-3], *output_size), dtype=torch.int64, device=DEVICE)
    grad = torch.randn(indices.shape).to(DEVICE)
    got = backward(impl)(grad, x, indices)
    assert got.shape == x.shape
    assert torch.equal(got.cpu(), torch.zeros(shape)), "no window: every gradient is zero"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_ties_through_forward(dtype: torch.dtype, impl: str) -> None:
    """Gradients land on the first maximum of each window (many ties among integers)."""
    gen = seeded("ties", dtype)
    x = torch.randint(0, 3, (2, 3, 9, 10, 11), generator=gen).to(dtype).to(DEVICE)
    _, indices = kernels.adaptive_max_pool3d(x, (4, 3, 5))
    grad = randn(tuple(indices.shape), dtype, gen)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_bitwise_deterministic(dtype: torch.dtype, impl: str) -> None:
    # Upsampling makes every element gather from several windows: the sum order must not move.
    grad, x, indices = case((1, 2, 4, 5, 6), (7, 9, 11), dtype, "det")
    first = backward(impl)(grad, x, indices)
    for _ in range(2):
        assert torch.equal(first, backward(impl)(grad, x, indices))


def test_mthreads_logs_when_it_runs(caplog: pytest.LogCaptureFixture) -> None:
    grad, x, indices = case((1, 2, 8, 8, 8), (4, 4, 4), torch.float16, "log")
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        backward("mthreads")(grad, x, indices)
    assert MTHREADS_LOG in caplog.text


def test_mthreads_falls_back_for_float64(caplog: pytest.LogCaptureFixture) -> None:
    grad, x, indices = case((1, 2, 8, 8, 8), (4, 4, 4), torch.float64, "fallback")
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = backward("mthreads")(grad, x, indices)
    assert MTHREADS_LOG not in caplog.text
    assert_backward_matches(got, grad, x, indices)


def test_mthreads_falls_back_unless_forced(caplog: pytest.LogCaptureFixture) -> None:
    if DEVICE == "musa":
        pytest.skip("on a MUSA device the Moore Threads kernel is the natural one")
    module = importlib.import_module("kernels.backends._mthreads.ops." + OP)
    grad, x, indices = case((1, 2, 8, 8, 8), (4, 4, 4), torch.float32, "unforced")
    with runtime.force("cpu"), caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = module.adaptive_max_pool3d_backward(grad, x, indices)
    assert MTHREADS_LOG not in caplog.text
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize("vendor", ["cpu", "mthreads"])
def test_autograd_through_use_kernels(vendor: str, caplog: pytest.LogCaptureFixture) -> None:
    """F.adaptive_max_pool3d(...).backward() runs our kernels inside use_kernels()."""
    gen = seeded("autograd", vendor)
    x64 = torch.randn((2, 3, 7, 9, 10), generator=gen, dtype=torch.float64)
    grad = torch.randn((2, 3, 3, 4, 4), generator=gen, dtype=torch.float64)
    x_ref = x64.clone().requires_grad_()
    F.adaptive_max_pool3d(x_ref, (3, 4, 4), return_indices=True)[0].backward(grad)

    x = x64.float().to(DEVICE).requires_grad_()
    with (
        runtime.force(vendor),
        kernels.use_kernels(),
        caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"),
    ):
        out, _ = F.adaptive_max_pool3d(x, (3, 4, 4), return_indices=True)
        out.backward(grad.float().to(DEVICE))
    assert not kernels.enabled()
    assert (MTHREADS_LOG in caplog.text) == (vendor == "mthreads")
    torch.testing.assert_close(x.grad.cpu().double(), x_ref.grad, rtol=1e-5, atol=1e-6)


def test_enable_and_disable(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    generic = kernels.ops.adaptive_max_pool3d_backward

    def spy(grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        calls.append("ours")
        return generic(grad, x, indices)

    monkeypatch.setattr(kernels.ops, "adaptive_max_pool3d_backward", spy)
    grad, x, indices = case((1, 2, 6, 6, 6), (3, 3, 3), torch.float32, "enable")
    with runtime.force("cpu"):
        kernels.enable()
        try:
            kernels.enable()  # idempotent
            got = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
        finally:
            kernels.disable()
        kernels.disable()  # idempotent
        torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert calls == ["ours"]
    assert_backward_matches(got, grad, x, indices)


def _bad(**change: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(1, 2, 4, 4, 4)
    out, indices = torch.ops.aten.adaptive_max_pool3d(x, [2, 2, 2])
    args = {"grad": torch.randn_like(out), "x": x, "indices": indices}
    args.update(change)
    return args["grad"], args["x"], args["indices"]  # type: ignore[return-value]


BAD_BACKWARD = [
    (_bad(indices=torch.zeros(1, 2, 2, 2, 2, dtype=torch.int32)), r"indices of dtype int64"),
    (_bad(grad=torch.randn(1, 1, 2, 2, 2)), r"expected sizes \[1, 2, 2, 2, 2\] for `gradOutput`"),
    (
        _bad(grad=torch.randn(1, 2, 2, 2, 2, dtype=torch.float64)),
        r"expected dtype torch.float32 for `gradOutput`",
    ),
    (_bad(x=torch.randn(2, 4, 4, 4)), r"expected dimensions 4 for `indices`"),
    (_bad(grad=torch.randn(1, 1, 2, 2, 2, 2)), r"Expected 4D or 5D gradOutput"),
    (_bad(x=torch.randn(3, 2, 4, 4, 4)), r"expected sizes \[3, 2, 2, 2, 2\] for `indices`"),
    (_bad(x=torch.ones(1, 2, 4, 4, 4, dtype=torch.int64)), r"not implemented for torch.int64"),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("args", "match"),
    BAD_BACKWARD,
    ids=["indices-dtype", "grad-shape", "grad-dtype", "rank", "grad-rank", "batch", "x-dtype"],
)
def test_bad_input(
    args: tuple[torch.Tensor, torch.Tensor, torch.Tensor], match: str, impl: str
) -> None:
    with pytest.raises((RuntimeError, NotImplementedError), match=match):
        backward(impl)(*args)


@pytest.mark.skipif(not ON_GPU, reason="needs a second device type: only a GPU host has one")
def test_mixed_devices() -> None:
    grad, x, indices = case((1, 2, 4, 4, 4), (2, 2, 2), torch.float32, "devices")
    with pytest.raises(RuntimeError, match="one device"):
        backward("generic")(grad, x, indices.cpu())


def test_window_cover_formula() -> None:
    """Input p lies in exactly the windows floor(p·O/I) ≤ o < ceil((p+1)·O/I), and
    max_window bounds both directions, for every size pair up to 24."""
    for i in range(1, 25):
        for o in range(1, 25):
            for p in range(i):
                covering = [q for q in range(o) if window_start(q, i, o) <= p < window_end(q, i, o)]
                first, last = (p * o) // i, -((-(p + 1) * o) // i)
                assert covering == list(range(first, last)), (i, o, p)
                assert len(covering) <= max_window(o, i)
            assert max(window_end(q, i, o) - window_start(q, i, o) for q in range(o)) == (
                max_window(i, o)
            )


def test_runtime_reports_and_forces() -> None:
    assert runtime.implementation(OP).startswith(
        "kernels.backends._mthreads." if runtime.vendor() == "mthreads" else "kernels.ops."
    )
    with runtime.force("mthreads"):
        assert runtime.vendor() == "mthreads"
        assert runtime.implementation(OP) == (
            "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward."
            "adaptive_max_pool3d_backward"
        )
        assert runtime.implementation("adaptive_max_pool3d") == (
            "kernels.ops.adaptive_max_pool3d.adaptive_max_pool3d"
        )
    with runtime.force("nvidia"):
        assert runtime.implementation(OP) == (
            "kernels.ops.adaptive_max_pool3d_backward.adaptive_max_pool3d_backward"
        )
    with pytest.raises(KeyError, match="unknown operator"):
        runtime.implementation("no_such_op")
    with pytest.raises(ValueError, match="unknown vendor"):
        runtime.set_vendor("amd-ish")


def test_kernels_vendor_environment_variable() -> None:
    """KERNELS_VENDOR picks the vendor in a fresh process; a bad value is refused."""
    code = f"from kernels import runtime; print(runtime.vendor(), runtime.implementation({OP!r}))"
    env = {**os.environ, "KERNELS_VENDOR": "mthreads", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "mthreads",
        "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward.adaptive_max_pool3d_backward",
    ]
    env["KERNELS_VENDOR"] = "nope"
    bad = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "KERNELS_VENDOR='nope'" in bad.stderr


@pytest.mark.parametrize(
    "config",
    [
        BackwardConfig(2, 4, 1, scatter=False, small=False),
        BackwardConfig(4, 8, 1, disjoint=False, scatter=False),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((1, 1, 5, 6, 9), (2, 4, 4)), ((1, 1, 4, 6, 8), (2, 3, 4)), ((1, 1, 2, 3, 4), (3, 4, 5))],
    ids=str,
)
def test_device_tiling(
    shape: tuple[int, ...], output_size: tuple[int, int, int], config: BackwardConfig
) -> None:
    """The disjoint and row kernels with small tiles: several per row and per plane."""
    grad, x, indices = case(shape, output_size, torch.float32, "tiling")
    got = kernels.ops.adaptive_max_pool3d_backward(grad, x, indices, config=config)
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("output_size", [(4, 3, 5), (3, 5, 2), (1, 1, 1)], ids=str)
def test_64_bit_offsets_path(
    output_size: tuple[int, int, int], impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The int64 arithmetic a >2^31-element tensor needs, forced on a small one."""
    for name in (
        "kernels.ops.adaptive_max_pool3d_backward",
        "kernels.ops._backward_scatter",
        f"kernels.backends._mthreads.ops.{OP}",
    ):
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "fits_int32", lambda *values: False)
        if hasattr(module, "_PLANS"):  # no plan made with 32-bit offsets
            monkeypatch.setattr(module, "_PLANS", PlanCache())
    grad, x, indices = case((2, 3, 9, 10, 15), output_size, torch.float16, "wide")
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.skipif(not big_memory_gpu(24), reason="needs a GPU with 24 GiB free")
def test_past_2_31_elements(impl: str) -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    x = torch.randn(BIG_SHAPE, generator=gen, dtype=torch.float16, device=DEVICE)
    # Our forward's indices (checked against PyTorch slice by slice in the forward suite): on
    # the H200, PyTorch 2.11's forward of the whole tensor gave one output depth's worth of
    # indices that matched no element.
    _, indices = kernels.adaptive_max_pool3d(x, BIG_OUTPUT)
    assert int(indices[0, 0, -1].min()) >= 2**31
    grad = torch.randn(indices.shape, generator=gen, dtype=torch.float16, device=DEVICE)
    got = backward(impl)(grad, x, indices)
    plane = BIG_SHAPE[3] * BIG_SHAPE[4]
    # Disjoint windows: exactly one element per window receives its (non-zero) gradient.
    assert int(torch.count_nonzero(got)) == int(torch.count_nonzero(grad))
    for od in (0, 100, BIG_OUTPUT[0] - 1):
        start = od * BIG_WINDOW_D
        part = x[:, :, start : start + BIG_WINDOW_D]
        local = indices[:, :, od : od + 1] - start * plane
        want = torch.ops.aten.adaptive_max_pool3d_backward(grad[:, :, od : od + 1], part, local)
        assert torch.equal(got[:, :, start : start + BIG_WINDOW_D], want)


KERNEL_CASES = [
    # (shape, output_size, the kernel the default plan launches on inputs past SMALL_INPUT)
    ((2, 3, 5, 12, 24), (1, 1, 1), "_fill_scatter_backward_kernel"),  # global, windows not 2^k
    ((1, 2, 3, 6, 48), (1, 2, 3), "_fill_scatter_backward_kernel"),  # windows (3, 3, 16)
    ((1, 2, 4, 9, 12), (2, 3, 3), "_fill_scatter_backward_kernel"),  # divisible, windows of 3
    ((1, 2, 16, 8, 16), (7, 4, 4), "_fill_scatter_backward_kernel"),  # overlaps on D only
    ((1, 2, 16, 11, 20), (7, 7, 7), "_scatter_outputs_kernel"),  # overlaps on every axis
    ((1, 2, 9, 13, 28), (5, 9, 11), "_scatter_outputs_kernel"),  # overlaps on every axis
    ((2, 64, 3, 4, 5), (2, 3, 4), "_fill_scatter_backward_kernel"),  # ... with 128 planes
    ((1, 2, 4, 6, 5), (4, 4, 9), "_scatter_outputs_kernel"),  # three candidates along W
    ((2, 64, 4, 6, 5), (4, 4, 9), "_fill_scatter_backward_kernel"),  # ... with 128 planes
    ((1, 1, 3, 2, 5), (7, 5, 9), "_rows_backward_kernel"),  # steep upsampling: many candidates
    ((1, 1, 4, 6, 8), (2, 3, 4), "_disjoint_backward_kernel"),  # 2^k windows
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "output_size", "kernel"), KERNEL_CASES, ids=str)
def test_kernel_dispatch(
    shape: tuple[int, ...], output_size: tuple[int, int, int], kernel: str, dtype: torch.dtype
) -> None:
    """Each specialized kernel is the one the default plan takes (small inputs aside: the
    small-input kernel is switched off here, as larger inputs have it), and it is exact."""
    module = importlib.import_module("kernels.ops.adaptive_max_pool3d_backward")
    grad, x, indices = case(shape, output_size, dtype, "dispatch")
    config = dataclasses.replace(module.backward_config(*shape[-3:]), small=False)
    launch = module._plan_launch(grad, indices, torch.empty_like(x), config)
    assert launch.kernel.fn.__name__ == kernel
    got = module.adaptive_max_pool3d_backward(grad, x, indices, config=config)
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [
        ((1, 1, 8, 8, 8), (4, 4, 4)),
        ((2, 3, 6, 9, 12), (2, 3, 4)),  # windows of 3
        ((3, 5, 12, 24), (1, 1, 1)),  # global, unbatched
        ((2, 8, 7, 10, 15), (7, 5, 3)),  # windows (1, 2, 5)
    ],
    ids=str,
)
def test_small_input_kernel(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    """Small inputs whose axes all divide take the lane-per-element kernel, with any strides
    of the gradient and indices, and it is exact."""
    module = importlib.import_module("kernels.ops.adaptive_max_pool3d_backward")
    grad, x, indices = case(shape, output_size, dtype, "small")
    five = (lambda t: t[None]) if x.dim() == 4 else (lambda t: t)
    launch = module._plan_launch(five(grad), five(indices), five(torch.empty_like(x)), None)
    assert launch.kernel.fn.__name__ == "_small_backward_kernel"
    assert_backward_matches(module.adaptive_max_pool3d_backward(grad, x, indices), grad, x, indices)
    grad_t = grad.transpose(-1, -3).contiguous().transpose(-1, -3)  # other strides, same values
    indices_t = indices.transpose(-2, -3).contiguous().transpose(-2, -3)
    got = module.adaptive_max_pool3d_backward(grad_t, x, indices_t)
    # The reference gets contiguous indices: PyTorch 2.13's CPU backward misreads strided ones.
    assert_backward_matches(got, grad_t, x, indices)


@pytest.mark.parametrize(
    "config",
    [
        BackwardConfig(4, 16, 1),
        BackwardConfig(4, 16, 1, scatter=False),
        BackwardConfig(4, 16, 1, scatter_first=True, scatter_tile=40, zeroed=False),
        BackwardConfig(4, 16, 1, scatter_first=True, zeroed=True),
        BackwardConfig(2, 4, 1, disjoint=False, scatter=False),
        BackwardConfig(
            4, 16, 1, scatter_first=True, scatter_tile=10**6, zeroed=False, scatter_box=32
        ),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((1, 1, 2, 6, 48), (1, 1, 1)), ((1, 1, 2, 6, 48), (1, 2, 3)), ((1, 1, 5, 9, 13), (3, 5, 6))],
    ids=str,
)
def test_kernels_with_small_tiles(
    shape: tuple[int, ...], output_size: tuple[int, int, int], config: BackwardConfig
) -> None:
    """Several tiles and row groups per slice, fill-and-scatter tiles of a few rows (split H),
    a whole plane walked 32 outputs at a time, the zeroed scatter where
    it is not the default, and the row kernel when the others are off."""
    grad, x, indices = case(shape, output_size, torch.float32, "small tiles")
    got = kernels.ops.adaptive_max_pool3d_backward(grad, x, indices, config=config)
    assert_backward_matches(got, grad, x, indices)
