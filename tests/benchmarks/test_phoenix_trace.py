"""benchmarks/phoenix_trace.py: an export it cannot make is one line before any run; --memory
needs no exporter at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

# Runs the script as `python benchmarks/phoenix_trace.py ARGS` would, in an environment without
# the modules named in BLOCKED, comma-separated: as where the HTTP exporter was installed without
# its dependencies (it imports opentelemetry.exporter.http, which nothing else brings).
_WITHOUT = """
import runpy, sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in sys.argv[1].split(",")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
script = sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
runpy.run_path(script, run_name="__main__")
"""

BLOCKED = "opentelemetry.exporter.http"


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, BLOCKED, "benchmarks/phoenix_trace.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_missing_exporter_is_one_line_naming_the_package_before_any_run():
    """Without the OTLP/HTTP exporter's modules the script exits 1 with one line naming the
    package to install and the module missing: no traceback, no report, no model loaded."""
    done = _script("http://127.0.0.1:9/v1/traces")
    assert 1 == done.returncode
    assert "" == done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith("phoenix_trace: exporting needs opentelemetry-exporter-otlp-proto-http")
    assert "No module named 'opentelemetry.exporter." in line


@pytest.mark.slow
def test_memory_mode_runs_without_any_exporter():
    """--memory makes its run and reports the spans by name with no exporter installed."""
    done = _script("--memory")
    assert 0 == done.returncode, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert 1 == report["spans"]["corrective_rag.run"]
    assert 1 <= report["spans"]["iteration 1"]
    assert report["attribute_bytes"] > 0
