"""Building kernel libraries: jobs, library files, the cache, outputs, manifests
and depfiles; and one kernel for the Python API (`artifact.py`, `hopperc.build`).
Nothing here loads the compiler until a job runs."""
