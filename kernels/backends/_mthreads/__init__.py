"""Moore Threads (MUSA) specializations of the generic operators."""
