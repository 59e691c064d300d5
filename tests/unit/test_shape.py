"""The shape the tooling keeps, checked by reading its source: paths and
the gate's suites come from the workspace when a function runs, the known-bad variant has one
name, a job's results entry has one constructor, the README stays short."""
import ast
import glob
import os
import subprocess
import sys

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(TOP, "tools"))

from kgate import workspace  # noqa: E402

MODULES = sorted(glob.glob(os.path.join(TOP, "tools", "kgate", "*.py")))


def _tree(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _top_level(tree):
    """The nodes that run at import: everything outside function bodies
    (class bodies run at import too)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


@pytest.mark.parametrize("path", MODULES, ids=os.path.basename)
def test_no_module_reads_the_environment_or_the_workspace_at_import(path):
    for node in _top_level(_tree(path)):
        text = ast.unparse(node) if isinstance(node, (ast.Attribute, ast.Call)) else ""
        assert not (isinstance(node, ast.Attribute) and text in ("os.environ", "os.getenv")), \
            f"{os.path.basename(path)}:{node.lineno}: {text} read at import"
        assert not (isinstance(node, ast.Call) and "current()" in text), \
            f"{os.path.basename(path)}:{node.lineno}: {text} at import"
        # the gate's suites too: read when a verdict or a job is made
        assert not (isinstance(node, ast.Call) and
                    any(text.startswith(f) for f in ("suite.load(", "load_suite(", "suite.gate("))), \
            f"{os.path.basename(path)}:{node.lineno}: {text} at import"


def test_paths_follow_the_workspace_installed_after_import(tmp_path):
    """Import every module under one KGATE_BUILD, then change it: the
    paths every module hands out are the new ones."""
    code = ("import os, sys; sys.path.insert(0, 'tools');"
            "from kgate import (bench, bisect, cli, kernel, lab, mutants, render, rootfs, run,"
            " selftest, workspace);"
            f"os.environ['KGATE_BUILD'] = {str(tmp_path / 'b')!r};"
            f"os.environ['KGATE_JOBS'] = {str(tmp_path / 'j')!r};"
            "print(kernel.out_dir('x86_64', 'fixed')); print(rootfs.rootfs_path('x86_64'));"
            "print(render.job_path('x86_64', 'fixed')); print(bench.cold_record());"
            "print(bisect.out_root()); print(selftest.default_out()); print(run.new_run_dir());"
            "print(workspace.current().serve); print(workspace.current().lab_jobs)")
    out = subprocess.run([sys.executable, "-c", code], cwd=TOP, check=True, capture_output=True,
                         text=True, env=dict(os.environ, KGATE_BUILD="/nonexistent/a",
                                             KGATE_JOBS="/nonexistent/j")).stdout.split()
    assert len(out) == 9
    for p in out:
        assert p.startswith(str(tmp_path)), p


def test_new_out_dir_never_hands_out_a_folder_twice(tmp_path):
    made = {workspace.new_out_dir(str(tmp_path)) for _ in range(5)}
    assert len(made) == 5 and all(os.path.isdir(p) for p in made)


def _literals(path, value):
    return [n.lineno for n in ast.walk(_tree(path))
            if isinstance(n, ast.Constant) and n.value == value]


def test_the_known_bad_variant_is_named_once():
    where = {os.path.basename(p): _literals(p, "known-bad") for p in MODULES}
    assert {k: v for k, v in where.items() if v} == {"common.py": [where["common.py"][0]]}
    assert len(where["common.py"]) == 1


def test_one_constructor_makes_a_jobs_results_entry():
    """A dict with both a verdict and the kernel's sha256 is a job's
    entry of results.json: only job.Job.record makes one."""
    makers = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"verdict", "kernel_sha256"} <= keys:
                    makers.append(f"{os.path.basename(path)}:{node.lineno}")
    assert len(makers) == 1 and makers[0].startswith("job.py:"), makers


def test_the_readme_stays_short():
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 200
