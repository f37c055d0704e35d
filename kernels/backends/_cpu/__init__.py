"""The CPU through Triton's interpreter: no operator overrides; the interpreter's heuristics."""
