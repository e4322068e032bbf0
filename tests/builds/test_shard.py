"""`hopperc build --shard I/N`: every job in exactly one shard, the same one on
every machine and whatever the order of the inputs; shards within one kernel of
each other's size; the shard named in the summary and the manifest."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hopperc.buildsys.shard import Shard, parse_shard, select, shard_of_each
from hopperc.cli import main
from tests.builds.helpers import TMA_COPY, hopperc

NAMES = st.lists(st.text("abc_.0123", min_size=1, max_size=6), unique=True, max_size=24)


@settings(max_examples=60, deadline=None)
@given(names=NAMES, total=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_shards_are_disjoint_cover_every_job_and_ignore_the_order(names, total, seed):
    shards = [select(names, Shard(i, total), str) for i in range(1, total + 1)]
    assert sorted(job for shard in shards for job in shard) == sorted(names)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    for shard in shards:  # each keeps the order it was given
        assert shard == [name for name in names if name in shard]
    shuffled = list(names)
    random.Random(seed).shuffle(shuffled)
    assert shard_of_each(shuffled, total) == shard_of_each(names, total)


def test_the_rule_is_fixed_across_machines_and_versions():
    """A change of the rule moves kernels between CI jobs: it must be deliberate."""
    names = [f"gemm_bn{n}.cubin" for n in (64, 128, 192, 256)] + ["scale_rows.cubin"]
    # by SHA-256: scale_rows 04b3.., bn128 700a.., bn192 caab.., bn256 ec9d.., bn64 f0aa..
    assert shard_of_each(names, 2) == {"scale_rows.cubin": 1, "gemm_bn128.cubin": 2,
                                       "gemm_bn192.cubin": 1, "gemm_bn256.cubin": 2,
                                       "gemm_bn64.cubin": 1}


@pytest.mark.parametrize("text, shard", [("1/1", Shard(1, 1)), ("2/3", Shard(2, 3)),
                                         (" 3 / 3 ", Shard(3, 3))])
def test_shard_values(text, shard):
    assert parse_shard(text) == shard and str(shard) == f"{shard.index}/{shard.total}"


@pytest.mark.parametrize("text, message", [
    ("0/2", "counts from 1 to N"), ("3/2", "counts from 1 to N"), ("1/0", "counts from 1"),
    ("x/y", "expected I/N"), ("2", "expected I/N"), ("1/2/3", "expected I/N"),
    ("-1/2", "expected I/N"), ("", "expected I/N")])
def test_a_malformed_shard_is_a_command_line_error(capsys, text, message):
    with pytest.raises(ValueError, match=message):
        parse_shard(text)
    with pytest.raises(SystemExit) as stop:
        main(["build", "k.hk", "--shard", text])
    assert stop.value.code == 1
    assert "--shard" in capsys.readouterr().err


LIBRARY = "".join(f'[[kernel]]\nsource = "k.hk"\nname = "{name}"\n\n'
                  for name in ("copy_a", "copy_b", "copy_c", "copy_d", "copy_e"))


def test_two_shards_build_the_library_between_them(shared_build, tmp_path):
    """Five outputs of one build (hits of the shared build's entry): shard 1/2 and
    2/2 write disjoint parts that make up the library, and name their shard."""
    (tmp_path / "k.hk").write_text(TMA_COPY)
    (tmp_path / "kernels.toml").write_text(LIBRARY)
    built = {}
    for index in (1, 2):
        proc = hopperc("build", "kernels.toml", "--out-dir", "out", "--shard", f"{index}/2",
                       "--manifest", f"shard{index}.json", cwd=tmp_path,
                       cache=shared_build.cache_copy(tmp_path / f"cache{index}"))
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads((tmp_path / f"shard{index}.json").read_text())
        assert manifest["shard"] == {"index": index, "total": 2}
        built[index] = {record["outputs"][0]["path"] for record in manifest["kernels"]}
        count = len(built[index])
        assert f"shard {index}/2: {count} kernels: {count} built ({count} from the cache)" \
            in proc.stdout
    assert not built[1] & built[2] and {len(built[1]), len(built[2])} == {2, 3}
    assert built[1] | built[2] == {f"out/copy_{c}.cubin" for c in "abcde"}
    assert sorted(p.name for p in (tmp_path / "out").glob("*.cubin")) == \
        sorted(p.rpartition("/")[2] for p in built[1] | built[2])
