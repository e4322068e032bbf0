"""What every comparison benchmark under bench/ reports: per case, hopperc's time and
TFLOP/s beside the baseline's, their ratio and the case's own columns (the output
difference, what the baseline ran); with --markdown a table headed by the GPU,
driver, PyTorch and date; and the geometric mean of the speed ratios."""
from __future__ import annotations

import datetime
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    case: tuple  # the case's labels: the table's first columns
    ours_ms: float
    theirs_ms: float
    flops: float
    notes: tuple[str, ...] = ()  # the case's further columns, formatted

    @property
    def ratio(self) -> float:
        """hopperc's speed over the baseline's."""
        return self.theirs_ms / self.ours_ms

    def timings(self, baseline: str) -> str:
        """One progress line's timings: both times, both TFLOP/s and the ratio."""
        return (f"hopperc {self.ours_ms * 1e3:9.1f} us {self.flops / self.ours_ms / 1e9:6.1f} "
                f"TFLOP/s  {baseline} {self.theirs_ms * 1e3:9.1f} us "
                f"{self.flops / self.theirs_ms / 1e9:6.1f} TFLOP/s  ratio {self.ratio:.3f}")


def print_markdown(title: str, gpu_name: str, driver: str, case_headers: list[str],
                   baseline: str, note_headers: list[str], rows: list[Measured]) -> None:
    import torch

    print(f"{title} on {gpu_name}, driver {driver}, torch {torch.__version__}, "
          f"{datetime.date.today()}\n")
    headers = [*case_headers, "hopperc us", "TFLOP/s", f"{baseline} us", "TFLOP/s", "ratio",
               *note_headers]
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        cells = [*map(str, row.case), f"{row.ours_ms * 1e3:.1f}",
                 f"{row.flops / row.ours_ms / 1e9:.1f}", f"{row.theirs_ms * 1e3:.1f}",
                 f"{row.flops / row.theirs_ms / 1e9:.1f}", f"{row.ratio:.3f}", *row.notes]
        print("| " + " | ".join(cells) + " |")


def geometric_mean_speed(rows: list[Measured]) -> float:
    return math.exp(sum(math.log(row.ratio) for row in rows) / len(rows))
