"""The job's Python: the cached environment over the host's torch (pyenv), the host packages'
bytecode, the shared compile cache, the probe of what a job runs on, and the accuracy step's
xdist width."""
