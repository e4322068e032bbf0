"""`hopperc build --manifest`: one record per kernel, for a runtime or a packager
to find the library without globbing (the schema is in docs/ci.md)."""
from __future__ import annotations

import json


def manifest_text(results: list, arch: str, shard=None) -> str:
    """One record per kernel: where it came from, what was built, and whether;
    with `--shard I/N`, which shard this manifest is of."""
    from hopperc import __version__, toolchain

    nvrtc = toolchain.nvrtc().version
    records = []
    for result in results:
        summary = result.entry.summary if result.entry else {}
        records.append({
            "source": result.recorded_name, "defines": result.job.defines, "arch": arch,
            "kernel": summary.get("kernel"), "symbol": summary.get("symbol"),
            "status": "failed" if result.exit_code else "cached" if result.cached else "built",
            "outputs": [{"path": path, "sha256": digest}
                        for path, digest in result.hashes.items()],
            "errors": [p.message for p in result.problems if p.severity == "error"],
            "hopperc": __version__, "nvrtc": nvrtc,
        })
    sharded = {"shard": {"index": shard.index, "total": shard.total}} if shard else {}
    return json.dumps({"schema": "hopperc.build.manifest/1", **sharded, "kernels": records},
                      indent=2) + "\n"
