"""How fast one read of the global-pooling input can be under the harness's timer.

Times, on the benchmark's (8, 64, 16, 56, 56) input in fp16 and fp32, with the harness's
DeviceTimer (1 GiB flush, median): PyTorch's per-plane `amax` (values only) and `max(dim=1)`
(values and first indices), our global-pooling forward, and our parts kernel alone (the
first of its two launches). Prints a Markdown table in microseconds and × the memory floor.
"""

from __future__ import annotations

import torch

from kernels.benchmark.bandwidth import copy_bandwidth_gbps, pool3d_traffic_bytes
from kernels.benchmark.harness import DeviceTimer
from kernels.ops._forward_global import plan_global
from kernels.ops.adaptive_max_pool3d import adaptive_max_pool3d

SHAPE = (8, 64, 16, 56, 56)
TIMER = DeviceTimer(warmup_ms=10, rep_ms=40)


def rows(dtype: torch.dtype, gbps: float) -> list[str]:
    """The table's rows for one dtype (`gbps`: the copy bandwidth)."""
    x = torch.randn(SHAPE, dtype=dtype, device="cuda")
    planes = x.view(SHAPE[0] * SHAPE[1], -1)
    floor_us = pool3d_traffic_bytes(x.numel(), len(planes), x.element_size()) / gbps / 1e3
    launch = plan_global(x)
    part_val = torch.empty(launch.shape, dtype=launch.acc, device="cuda")
    part_pos = torch.empty(launch.shape, dtype=torch.int64, device="cuda")
    cases = {
        "torch amax per plane": lambda: planes.amax(dim=1),
        "torch max(dim=1), values and indices": lambda: planes.max(dim=1),
        "ours: adaptive_max_pool3d(x, 1)": lambda: adaptive_max_pool3d(x, (1, 1, 1)),
        "ours: parts kernel alone": lambda: launch.parts(x, part_val, part_pos),
    }
    out = []
    for name, fn in cases.items():
        fn()
        us = TIMER(fn) * 1e3
        out.append(f"| {str(dtype)[6:]} | {name} | {us:.1f} | {us / floor_us:.2f} |")
    return out


def main() -> None:
    gbps = copy_bandwidth_gbps("cuda", TIMER)
    print("| dtype | case | us | x floor |\n| --- | --- | ---: | ---: |")
    for dtype in (torch.float16, torch.float32):
        print("\n".join(rows(dtype, gbps)), flush=True)


if __name__ == "__main__":
    main()
