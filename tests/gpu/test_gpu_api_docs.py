"""docs/api.md's examples, those that launch included, run as written on a GPU."""
import pytest

from tests.conftest import ROOT
from tests.test_api import run_documented_examples

pytestmark = pytest.mark.gpu


def test_the_api_page_runs_on_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPPERC_CACHE_DIR", str(tmp_path))
    monkeypatch.chdir(ROOT)
    namespace = run_documented_examples(gpu=True)
    torch = namespace["torch"]
    torch.cuda.synchronize()
    x, s, y = namespace["x"], namespace["s"], namespace["y"]
    # one product rounded to bf16: at most one bf16 step (2^-7 relative) from torch's rounding
    torch.testing.assert_close(y.float(), (x.float() * s[:, None]).bfloat16().float(),
                               rtol=2 ** -7, atol=0)
    assert namespace["scale_rows"].name == namespace["same"].name == "scale_rows"
