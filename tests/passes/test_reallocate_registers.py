"""reallocate_registers: setmaxnreg per budgeted role, against the launch share."""
from hopperc.ir.layout import launch_registers
from tests.conftest import ir_after
from tests.passes.kernels import TWO_PRODUCERS, WS_GEMM

PASS = "reallocate_registers"


def test_launch_share_is_the_register_file_over_the_threads():
    # 65536 / 384 = 170.7 -> 168; 65536 / 128 = 512 -> capped at 255 -> 248.
    assert launch_registers(384) == 168 and launch_registers(128) == 248
    assert launch_registers(256) == 248 and launch_registers(512) == 128


def test_producer_gives_registers_back_and_consumers_take_them():
    out = ir_after(WS_GEMM, PASS)
    math = out.split("role math")[1].split("role load")[0]
    load = out.split("role load")[1]
    assert math.splitlines()[1].strip().startswith("setmaxnreg.inc 232")
    assert load.splitlines()[1].strip().startswith("setmaxnreg.dec 40")
    assert "168 registers per thread at launch (384 threads)" in out


def test_negative_budget_equal_to_the_launch_share_needs_no_instruction():
    text = WS_GEMM.replace("regs 232", "regs 168").replace("regs 40", "regs 168")
    out = ir_after(text, PASS)
    assert "setmaxnreg" not in out


def test_negative_roles_without_budgets_get_none():
    assert "setmaxnreg" not in ir_after(TWO_PRODUCERS, PASS)
