"""Fuzzing the CLI. Hypothesis keeps caches (not examples: the tests use no
database) in a directory it creates under the working directory; keep them out
of the repository."""
import tempfile
from pathlib import Path

from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "hopperc-fuzz-hypothesis")
