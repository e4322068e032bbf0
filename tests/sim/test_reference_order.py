"""The numpy reference runs whole roles in the order of the data they hand
each other, whatever order they are declared in and whatever else they load."""
from __future__ import annotations

from pathlib import Path

from hopperc import driver
from hopperc.diagnostics import SourceFile

HERE = Path(__file__).parent
EPILOGUE_LOADS = HERE / "kernels" / "gemm_epilogue_loads.hk"


def test_a_math_role_that_loads_its_own_operand_runs_after_its_producer():
    """The math role is declared first and TMA-loads the residual itself; run
    first because it loads, it would multiply empty stages (a false alarm)."""
    source = driver.read_source(EPILOGUE_LOADS)
    assert driver.build(source).result.cubin  # a kernel NVRTC compiles, not only one the model runs
    report = driver.simulate(source, seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference" and report.max_error["C"] == 0


def test_declaration_order_does_not_matter():
    text = EPILOGUE_LOADS.read_text()
    math = text[text.index("    role math"):text.index("    role load")]
    load = text[text.index("    role load"):text.rindex("}")]
    swapped = text.replace(math + load, load + "\n" + math.rstrip() + "\n")
    assert swapped.index("role load") < swapped.index("role math")
    report = driver.simulate(SourceFile("swapped.hk", swapped), seeds=2, search=0)
    assert report.ok and report.max_error["C"] == 0, [f.headline() for f in report.findings]


def test_roles_handing_data_both_ways_are_not_compared_rather_than_guessed():
    report = driver.simulate(driver.read_source(HERE / "manual" / "round_trip.hk"), seeds=2,
                             search=0)
    assert report.ok and not report.max_error
    assert "'io' -> 'math' through sx" in report.reference
    assert "'math' -> 'io' through sy" in report.reference
