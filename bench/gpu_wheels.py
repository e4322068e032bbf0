"""`make gpu-wheels`: the folder `make gpu-check` installs from on a machine
without network (bench/gpu_check.py): hopperc's wheel, built from the checkout,
the wheels of the requirements a CUDA 13 PyTorch image lacks (for CPython 3.12 on
manylinux x86_64), and the hash of the sources hopperc's wheel was built from.

    python bench/gpu_wheels.py [--out wheels]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# hopperc's requirements that a CUDA 13 PyTorch image lacks; it has the others.
CARRIED = ("lark", "platformdirs")
WHEEL_FOLDER_LIMIT = 40 << 20
SOURCE_DIGEST = "hopperc-sources.sha256"  # in the folder: what its hopperc wheel was built from
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
# The checkout's folders the wheel ships (pyproject.toml puts grammar/ and
# templates/ inside the package).
SHIPPED_FOLDERS = ("hopperc", "grammar", "templates")


def package_digest(root: Path) -> str:
    """The hash of a checkout's code, grammar and templates (what the wheel ships),
    by relative path: the folder keeps the checkout's, so a check with an older
    wheel fails."""
    digest = hashlib.sha256()
    files = sorted(p for folder in SHIPPED_FOLDERS for p in (root / folder).rglob("*")
                   if p.suffix in (".py", ".lark", ".j2") and "__pycache__" not in p.parts)
    for path in files:
        digest.update(f"{path.relative_to(root)}\0".encode() + path.read_bytes())
    return digest.hexdigest()


def carried_requirements() -> list[str]:
    """The carried packages as pyproject.toml pins them."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        dependencies = tomllib.load(handle)["project"]["dependencies"]
    return [d for d in dependencies if re.match(r"[A-Za-z0-9_.-]+", d).group(0) in CARRIED]


def wheels_command(out: Path) -> int:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([*PIP, "download", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.12", "--implementation", "cp", "--abi", "cp312", *platforms, "-d",
                    str(out), *carried_requirements()], check=True)
    build_hopperc_wheel(out)
    size = sum(p.stat().st_size for p in out.iterdir())
    for wheel in sorted(out.iterdir()):
        print(f"{wheel.stat().st_size / 1024:8.0f} KiB  {wheel.name}")
    print(f"{size / (1 << 20):.2f} MiB in {out}/")
    if size > WHEEL_FOLDER_LIMIT:
        print(f"error: the folder exceeds {WHEEL_FOLDER_LIMIT >> 20} MiB", file=sys.stderr)
        return 1
    return 0


def build_hopperc_wheel(out: Path) -> None:
    """hopperc's wheel, and the digest of the sources it was built from, into `out`.
    Built from a copy of what the wheel ships, so no earlier build's leftovers go in."""
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "hopperc"
        for folder in SHIPPED_FOLDERS:
            shutil.copytree(ROOT / folder, source / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
            shutil.copy(ROOT / name, source / name)
        subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(out), str(source)], check=True)
    (out / SOURCE_DIGEST).write_text(package_digest(ROOT) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "wheels")
    return wheels_command(parser.parse_args().out.resolve())


if __name__ == "__main__":
    sys.exit(main())
