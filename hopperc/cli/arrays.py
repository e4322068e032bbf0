"""The .npz files of `hopperc sim --inputs IN.npz --save OUT.npz`: the arrays a
simulation runs on, and the tensors it stored, by tensor name (numpy, which
loads only here, and only for these options)."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

from hopperc.diagnostics import input_error, unreadable_input


def load_arrays(path: str) -> dict[str, object]:
    """The arrays of an archive `np.savez` wrote, by name; never a pickle."""
    import numpy as np
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise unreadable_input(path, exc) from None
    if magic == b"\x93NUMPY":
        raise input_error(path, "holds one array (.npy), not a .npz archive of arrays named as the "
                           "kernel's tensors (np.savez)")
    if not magic.startswith(b"PK"):
        raise input_error(path, "is not a .npz archive (np.savez writes one)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise input_error(path, f"cannot read the arrays of this .npz archive: {exc}") from None


def save_arrays(path: str, arrays: dict) -> None:
    """Write `arrays` to `path` as one .npz, whole or not at all; bf16 and fp8 as
    float32 (.npz has no such dtype; the values are exact in float32)."""
    import numpy as np

    from hopperc.buildsys.outputs import write_atomically
    portable = {name: array if array.dtype.kind in "fiu" else array.astype(np.float32)
                for name, array in arrays.items()}
    buffer = io.BytesIO()
    np.savez(buffer, **portable)
    write_atomically({Path(path): buffer.getvalue()})
