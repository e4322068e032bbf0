"""hopperc: a compiler for NVIDIA Hopper kernels that writes all the synchronization."""
__version__ = "0.1.0"


def compile(source, defines=None, *, arch="sm_90a", device=0):
    """Build a kernel (a .hk path or its text) and load it on a GPU: returns a
    `hopperc.runtime.Kernel`. See `hopperc.api.compile`."""
    from hopperc.api import compile as compile_and_load

    return compile_and_load(source, defines, arch=arch, device=device)
