"""The runtime finds the kernel in its cubin by the entry symbol the metadata records,
not by the kernel's source name (they differ: `main` is `u_main`)."""
import pytest
from cuda.bindings import driver

import hopperc
from hopperc.runtime import MetadataError, driver_api, kernel
from hopperc.runtime.spec import parse_spec
from tests.conftest import ROOT

MAIN = """kernel main(X: f32[M, N]) threads 128 {
    shared b: f32[64, 64]
    tma b <- X[0, 0]
}
"""


def test_the_function_is_looked_up_by_the_recorded_symbol(monkeypatch):
    compiled = hopperc.build(MAIN)
    looked_up = []

    def call(function, *args):
        if function is driver.cuModuleGetFunction:
            looked_up.append(args[1])
        return object()

    monkeypatch.setattr(driver_api, "device",
                        lambda ordinal: driver_api.Device(ordinal, "H100", (9, 0), 232448, 132))
    monkeypatch.setattr(driver_api, "make_current", lambda ordinal: None)
    monkeypatch.setattr(driver_api, "call", call)
    loaded = kernel.Kernel(compiled.cubin, compiled.metadata)
    assert looked_up == [b"u_main"]
    assert loaded.name == "main"


def test_metadata_without_a_symbol_is_refused():
    record = dict(hopperc.build(ROOT / "samples" / "tma_copy.hk").metadata)
    assert parse_spec(record).symbol == "u_tma_copy"
    del record["symbol"]
    with pytest.raises(MetadataError, match="KeyError: 'symbol'"):
        parse_spec(record)
