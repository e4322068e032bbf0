"""The instruction classes of a SASS loop (`sass_metrics.class_counts`, the
columns `bench/rows.py` prints and docs/perf.md's table per tile), on a small
synthetic listing: no SASS tools needed."""
from __future__ import annotations

from hopperc.backend import sass_metrics as sm

LISTING = [
    ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "", "P0,[R166+UR5+0x18000],R165"),
    ("WARPGROUP.ARRIVE", "", ""),
    ("HGMMA.64x128x16.F32.BF16", "", "R24,gdesc[UR8],RZ,!UPT"),
    ("UIADD3", "", "UR8,UR13,0x10002,URZ"),
    ("UMOV", "", "UR9,0x40000040"),
    ("IMAD.SHL.U32", "", "R168,R170,0x80,RZ"),
    ("I2FP.F32.S32", "", "R168,R168"),
    ("FSETP.GEU.AND", "", "P6,PT,R172,R3,PT"),
    ("FSEL", "", "R120,R26,-INF,!P6"),
    ("FMNMX", "", "R27,R120,-INF,!PT"),
    ("SHFL.BFLY", "PT", "R0,R27,0x1,0x1f"),
    ("FFMA", "", "R30,R120,R2,-R4"),
    ("FMUL", "", "R31,R31,R5"),
    ("FADD", "", "R32,R30,R32"),
    ("MUFU.EX2", "", "R30,R30"),
    ("F2FP.BF16.F32.PACK_AB", "", "R40,R31,R30"),
    ("WARPGROUP.DEPBAR.LE", "", "gsb0,0x0"),
    ("ELECT", "", "P0,URZ,PT"),
    ("PLOP3.LUT", "", "P0,PT,PT,PT,PT,0x8,0x0"),
    ("UTMALDG.2D", "", "[UR8],[UR4]"),
    ("BRA", "@P1", "0x0"),
]


def _code() -> list[sm.Instruction]:
    return [sm.Instruction(*fields) for fields in LISTING]


def test_each_instruction_has_its_class():
    classes = [sm.instruction_class(i) for i in _code()]
    assert classes == ["sync", "sync", "HGMMA", "address", "address", "address", "convert",
                       "predicate", "FSEL", "FMNMX", "SHFL", "FFMA/FMUL/FADD",
                       "FFMA/FMUL/FADD", "FFMA/FMUL/FADD", "MUFU", "convert", "sync", "sync",
                       "predicate", "other", "branch"]


def test_class_counts_name_every_class_in_table_order_and_add_up():
    counts = sm.class_counts(_code())
    assert tuple(counts) == sm.INSTRUCTION_CLASSES
    assert counts == {"HGMMA": 1, "MUFU": 1, "FMNMX": 1, "SHFL": 1, "FFMA/FMUL/FADD": 3,
                      "FSEL": 1, "convert": 2, "sync": 4, "address": 3, "predicate": 2,
                      "branch": 1, "other": 1}
    assert sum(counts.values()) == len(LISTING)


def test_fp8_products_count_as_products():
    assert sm.instruction_class(sm.Instruction("QGMMA.64x128x32.F32.E4M3.E4M3", "", "")) == "HGMMA"
