"""A kernel series is data (kernel/series.yaml): the source package and
the folders of what goes on top; a second series is one more entry."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from kgate import cli, common, kernel  # noqa: E402


def test_the_default_series_is_debians_6_1_with_our_folders():
    s = kernel.kernel_series()
    assert s.name == "debian-6.1" and s.package == "linux-source-6.1"
    assert s.tarball == "/usr/src/linux-source-6.1.tar.xz"
    assert s.patches == os.path.join(kernel.KERNEL_DIR, "patches")
    assert s.control == os.path.join(kernel.KERNEL_DIR, "regressions")
    fixed, bad = kernel.variant_patches("fixed"), kernel.variant_patches(common.KNOWN_BAD)
    assert bad == fixed + kernel.series("control") and kernel.series("mutants")


def _second_series(tmp_path, monkeypatch):
    """kernel/series.yaml with a second series, its folders in tmp_path."""
    with open(kernel.SERIES_FILE, encoding="utf-8") as f:
        text = f.read()
    for d in ("p", "c", "m", "cfg"):
        (tmp_path / d).mkdir()
    for d, name in (("p", "0001-a.patch"), ("c", "0001-bad.patch"), ("m", "01-m.patch")):
        (tmp_path / d / name).write_text("x\n")
        (tmp_path / d / "series").write_text(name + "\n")
    for name in ("base.config", "x86_64.config"):
        (tmp_path / "cfg" / name).write_text("CONFIG_NET=y\n")
    text += (f"  other:\n    package: linux-source-9.9\n    tarball: {tmp_path}/t.tar.xz\n"
             f"    patches: {tmp_path}/p\n    control: {tmp_path}/c\n    mutants: {tmp_path}/m\n"
             f"    configs: {tmp_path}/cfg\n")
    path = tmp_path / "series.yaml"
    path.write_text(text)
    monkeypatch.setattr(kernel, "SERIES_FILE", str(path))


def test_a_second_series_is_one_entry(tmp_path, monkeypatch, use_workspace):
    _second_series(tmp_path, monkeypatch)
    use_workspace(tmp_path / "build", series="other")
    assert [os.path.basename(p) for p in kernel.variant_patches(common.KNOWN_BAD)] == \
        ["0001-a.patch", "0001-bad.patch"]
    assert kernel.fragments(common.target("x86_64"))[0] == str(tmp_path / "cfg" / "base.config")
    assert not kernel.has_debug("x86_64")
    assert kernel.kernel_series().tarball == f"{tmp_path}/t.tar.xz"
    use_workspace(tmp_path / "build", series="other", tarball="/elsewhere.tar.xz")
    assert kernel.kernel_series().tarball == "/elsewhere.tar.xz"


def test_make_deps_installs_every_series_package(tmp_path, monkeypatch, capsys):
    _second_series(tmp_path, monkeypatch)
    assert cli.main(["packages"]) == 0
    pkgs = capsys.readouterr().out.split()
    assert pkgs[:2] == ["linux-source-6.1", "linux-source-9.9"]


def test_an_unknown_series_is_a_usage_error(use_workspace, tmp_path, capsys):
    use_workspace(tmp_path / "build", series="nope")
    with pytest.raises(common.KgateError, match="unknown kernel series 'nope'"):
        kernel.kernel_series()
    capsys.readouterr()
    assert cli.main(["kernel", "x86_64"]) == 2
    assert "unknown kernel series 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("text", [
    "",
    "series: {}\n",
    "default: a\nseries:\n  b: {package: p, tarball: t, patches: p, control: c, mutants: m, configs: c}\n",
    "default: a\nseries:\n  a: {package: p, tarball: t, patches: p, control: c, mutants: m}\n",
    "default: a\nseries:\n  a: {package: p, tarball: t, patches: p, control: c, mutants: m, "
    "configs: c, extra: 1}\n",
    "default: a\nseries:\n  a: {package: p, tarball: '', patches: p, control: c, mutants: m, "
    "configs: c}\n",
    "default: a\ndefault: a\n",
    "default: [a]\nseries:\n  a: {package: p, tarball: /t, patches: p, control: c, mutants: m, "
    "configs: g}\n",
    "default: 1\nseries:\n  1: {package: p, tarball: /t, patches: p, control: c, mutants: m, "
    "configs: g}\n",
    "default: a\nseries:\n  a: {package: p, tarball: t.tar.xz, patches: p, control: c, "
    "mutants: m, configs: g}\n",
    "default: a\nseries:\n  a: {package: p, tarball: /t, patches: p, control: ./p, mutants: m, "
    "configs: g}\n",
    "default: a\nseries:\n  a: {package: p, tarball: /t, patches: p, control: c, mutants: m, "
    "configs: g, 1: x}\n",
    "default: a\nother: 1\nseries:\n  a: {package: p, tarball: /t, patches: p, control: c, "
    "mutants: m, configs: g}\n",
])
def test_a_bad_series_file_is_refused(tmp_path, text):
    path = tmp_path / "series.yaml"
    path.write_text(text)
    with pytest.raises(common.KgateError):
        kernel.load_series(str(path))


@pytest.mark.parametrize("var", ["KGATE_BUILD", "KGATE_JOBS", "KGATE_SERIES",
                                 "KGATE_KERNEL_TARBALL"])
def test_a_variable_set_but_empty_is_a_usage_error(var, monkeypatch, capsys):
    monkeypatch.setenv(var, "")
    assert cli.main(["list"]) == 2
    assert f"{var} set but empty" in capsys.readouterr().err


def test_the_series_command_names_the_series_and_lists_its_patches(capsys):
    assert cli.main(["series"]) == 0
    assert capsys.readouterr().out.startswith("debian-6.1: linux-source-6.1 (")
    assert cli.main(["series", "--patches"]) == 0
    listed = capsys.readouterr().out.split()
    want = [os.path.relpath(p, common.TOP) for kind in ("patches", "control", "mutants")
            for p in kernel.series(kind)]
    assert listed == want and len(listed) == len(set(listed)) > 20


def test_a_missing_series_file_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(kernel, "SERIES_FILE", str(tmp_path / "series.yaml"))
    assert cli.main(["series"]) == 2
    assert "series.yaml: No such file" in capsys.readouterr().err
