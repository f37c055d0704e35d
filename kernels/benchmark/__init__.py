"""Benchmark harness: times our kernels against PyTorch's own operators, side by side.

`python -m kernels.benchmark --op adaptive_max_pool3d_backward` prints the table in the seed's
form (plus achieved bandwidth) and can write it as markdown and as JSON for the runner; the
JSON schema is in `docs/benchmark-json.md`. Modules, one job each:

- `sizes`: the shapes and dtypes a run covers (`tiny`, `large`);
- `definition`: what an operator benchmark is (`OpBenchmark`, `Case`, `Prepared`), and
  each operator's definition found through `kernels.registry`;
- `adaptive_max_pool3d`, `adaptive_max_pool3d_backward`: one definition per operator;
- `implementations`: picks the generic, Moore Threads or active implementation via
  `kernels.runtime`, and describes the device;
- `harness`: verifies each case once, then times reference and kernel;
- `bandwidth`: minimum traffic, achieved GB/s and the device's copy bandwidth;
- `report`: rows, means, markdown and JSON.
"""
