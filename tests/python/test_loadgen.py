"""python/loadgen.py's decode-time rule: the union of the requests' decoding intervals."""
import importlib.util

from conftest import ROOT


def load_loadgen():
    spec = importlib.util.spec_from_file_location("loadgen", ROOT / "python/loadgen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_union_seconds_counts_overlaps_once_and_skips_gaps():
    u = load_loadgen().union_seconds
    assert u([]) == 0.0
    assert u([(1.0, 3.0)]) == 2.0
    assert u([(1.0, 3.0), (2.0, 4.0)]) == 3.0            # overlapping streams: 1..4
    assert u([(5.0, 6.0), (1.0, 2.0)]) == 2.0            # two waves with a prefill gap between
    assert u([(1.0, 10.0), (2.0, 3.0), (4.0, 5.0)]) == 9.0   # nested
    assert u([(1.0, 2.0), (2.0, 3.0)]) == 2.0            # touching
