"""The scatter probe's parts do what their names say (interpreter: correctness, not time)."""

from __future__ import annotations

import torch

from tools import scatter_bounds


def test_the_parts_zero_the_whole_gradient_and_skip_only_the_neighbour_checks() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 6, 10)  # W windows overlap: fill_scatter whatever the planes
    _, idx = torch.ops.aten.adaptive_max_pool3d(x, [2, 3, 4])
    grad = torch.randn(idx.shape)
    made = scatter_bounds.variants(grad, x, idx)
    assert made["route"].startswith("fill_scatter")
    parts, gin = made["parts"], made["p"].gin
    want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, idx)

    for name in ("zeros", "zeros-full"):
        gin.fill_(7.0)
        parts[name]()
        assert (gin == 0).all(), name

    assert {"inbox-ours", "inbox-no-dedup", "inbox-no-stores"} <= parts.keys()
    gin.fill_(7.0)
    parts["inbox-ours"]()
    assert torch.allclose(gin, want, atol=1e-6)

    # Each output's own gradient at its argmax, with no sum: right wherever one window chose
    # an element, wrong (one of the gradients) where several did.
    flat_idx, flat_grad = idx.flatten(2), grad.flatten(2)
    chosen = torch.zeros_like(want).flatten(2)
    chosen.scatter_add_(2, flat_idx, torch.ones_like(flat_grad))
    single = (chosen == 1).view_as(want)
    assert (chosen > 1).any()  # the case has shared argmaxes to get wrong
    for prefix in ("", "inbox-"):
        gin.fill_(7.0)
        parts[f"{prefix}no-dedup"]()
        assert torch.equal(gin[single], want[single]), prefix
        assert (gin[chosen.view_as(want) == 0] == 0).all(), prefix
        assert not torch.allclose(gin, want), prefix

        gin.fill_(7.0)
        parts[f"{prefix}no-stores"]()
        assert (gin == 0).all(), prefix  # zeros only: no index lands in a tile
