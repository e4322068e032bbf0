"""The CPU model of a lowered kernel behind `hopperc sim` and `hopperc check` (docs/sim.md)."""
