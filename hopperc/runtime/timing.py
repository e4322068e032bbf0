"""GPU time of a launch, measured with CUDA events on one stream.

Each timed run starts with a cold L2: a buffer larger than the L2 is
overwritten on the same stream between runs (outside the timed interval), so
a kernel cannot read its inputs from the previous run's cache.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from cuda.bindings import driver

from hopperc.runtime import driver_api

# H100 and H200 have 50 MB of L2; four times that leaves none of it warm.
FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    runs: int


class Timer:
    """Times `launch()` (which enqueues work on `stream`) over `runs` runs after
    `warmup` untimed ones; the median is the figure to report."""

    def __init__(self, stream: driver.CUstream, flush_bytes: int = FLUSH_BYTES):
        self.stream = stream
        self.flush_bytes = flush_bytes
        self._flush = driver_api.call(driver.cuMemAlloc, flush_bytes)
        flags = driver.CUevent_flags.CU_EVENT_DEFAULT
        self._start = driver_api.call(driver.cuEventCreate, flags)
        self._end = driver_api.call(driver.cuEventCreate, flags)

    def time(self, launch: Callable[[], object], warmup: int = 5, runs: int = 20) -> Timing:
        for _ in range(warmup):
            launch()
        times = []
        for run in range(runs):
            driver_api.call(driver.cuMemsetD8Async, self._flush, run & 0xFF, self.flush_bytes,
                            self.stream)
            driver_api.call(driver.cuEventRecord, self._start, self.stream)
            launch()
            driver_api.call(driver.cuEventRecord, self._end, self.stream)
            driver_api.call(driver.cuEventSynchronize, self._end)
            times.append(driver_api.call(driver.cuEventElapsedTime, self._start, self._end))
        return Timing(statistics.median(times), min(times), runs)

    def close(self) -> None:
        driver_api.call(driver.cuEventDestroy, self._start)
        driver_api.call(driver.cuEventDestroy, self._end)
        driver_api.call(driver.cuMemFree, self._flush)

    def __enter__(self) -> "Timer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
