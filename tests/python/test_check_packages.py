"""python/check_packages.py: the check that every system file the builds use comes from a
package the Makefile lists. These tests show it fails, naming the package, when a list misses
one, and that it names the arm64 runtime package a fresh machine lacked (issue 40)."""
import subprocess
import sys

from conftest import BUILD, ROOT

sys.path.insert(0, str(ROOT / "python"))
import check_packages  # noqa: E402


def listed():
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "print-packages"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_the_lists_cover_this_build():
    problems = check_packages.check([BUILD], listed())
    assert problems == []


def test_a_package_dropped_from_the_lists_is_named():
    # xxhash.h is included by the kernels and nothing else on the lists installs it.
    without = [p for p in listed() if p != "libxxhash-dev"]
    run = subprocess.run([sys.executable, str(ROOT / "python/check_packages.py"), "--lists",
                          " ".join(without), str(BUILD)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "libxxhash-dev: provides /usr/include/xxhash.h" in run.stderr


def test_a_foreign_runtime_library_on_no_path_is_named_with_its_architecture(tmp_path, monkeypatch):
    # The fresh-machine failure: qemu's arm64 loader found no libstdc++.so.6 because
    # libstdc++6:arm64 was not installed (the cross compiler's copy is elsewhere).
    monkeypatch.setitem(check_packages.ARCH_LIBDIRS, "aarch64", [str(tmp_path)])
    found, absent = check_packages.resolve_runtime({"libstdc++.so.6": ("aarch64", "base_test")})
    assert found == set()
    assert list(absent) == ["libstdc++6:arm64"]
    assert "needed by base_test" in absent["libstdc++6:arm64"]
