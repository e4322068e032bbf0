"""Building kernel libraries: jobs, library files, the cache, outputs, manifests
and depfiles. Nothing here loads the compiler until a job runs."""
