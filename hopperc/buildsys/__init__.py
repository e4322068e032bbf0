"""Building kernels and kernel libraries, for the command line and the Python API
alike: the plan (jobs and their outputs), library files, the jobs, the cache and
its remote tier, shards, outputs, manifests and depfiles, the launch metadata
and the compiler's identity; and one kernel for the Python API (`artifact.py`,
`hopperc.build`). It imports nothing of the command line: it raises, and the
command line reports. Nothing here loads the compiler until a job runs."""
