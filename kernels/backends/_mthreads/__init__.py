"""Moore Threads (MUSA): an override of the backward (`ops/`), and heuristics (`heuristics.py`)."""
