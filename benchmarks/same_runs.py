"""Whether two trees' loop runs are the same, id for id: for a change that must not alter results.

``benchmarks/loop.py --json`` writes, per query, a ``trace`` of what the run did (each iteration's
query, searched lanes, judged ids and their verdicts, kept ids and CRAG action; the stop detail,
the kept ids and the tokens). Run the same commands on the tree before a change and after it,
into two folders, then:

    python benchmarks/same_runs.py BEFORE_DIR AFTER_DIR

Each JSON file in BEFORE_DIR is compared with its namesake in AFTER_DIR, query by query, and
each judged document's whole verdict (relevant, score, confidence, reasoning, missing). Prints
``SAME`` or the first differing queries per file (down to the field that differs), with the
headline figures of both; exits 1 when any file differs, is missing on either side, is no
loop.py report, or holds traces without whole verdicts (written by an older loop.py: rerun).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

KEYS = ("query", "stop_reason", "judged", "kept", "relevant_kept", "llm_calls", "trace")
VERDICT_FIELDS = ("relevant", "score", "confidence", "reasoning", "missing")
FIGURES = ("recall", "all_found", "precision", "llm_calls_per_query", "prompt_tokens_per_query")
SHOWN = 3  # differing queries printed per file


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where ``a`` and ``b`` first differ (``trace.iterations[0].verdicts[1].score``), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            found = first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else key)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found is not None:
                return found
        return f"{where}: {len(a)} items -> {len(b)}" if len(a) != len(b) else None
    if a != b or type(a) is not type(b):
        return f"{where}: {json.dumps(a)[:300]} -> {json.dumps(b)[:300]}"
    return None


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per query whose run differs (the first differing field), in query order."""
    old, new = before.get("per_query", []), after.get("per_query", [])
    found = [f"{len(old)} queries before, {len(new)} after"] if len(old) != len(new) else []
    for a, b in zip(old, new, strict=False):
        key = next((k for k in KEYS if a.get(k) != b.get(k)), None)
        if key is not None:
            where = first_difference(a.get(key), b.get(key), key)
            found.append(f"query {a.get('query')}: {where}")
    return found


def without_whole_verdicts(report: dict[str, Any]) -> int:
    """How many iterations of the report's traces lack whole verdicts (an older loop.py's)."""
    lacking = 0
    for run in report.get("per_query", []):
        for iteration in (run.get("trace") or {}).get("iterations", []):
            verdicts = iteration.get("verdicts")
            whole = isinstance(verdicts, list) and all(
                isinstance(v, dict) and all(f in v for f in VERDICT_FIELDS) for v in verdicts
            )
            lacking += not whole
    return lacking


def compare(before_dir: Path, after_dir: Path) -> int:
    """Print the comparison of every file; the number of files that differ, are missing on
    either side, or could not be compared."""
    bad = 0
    files = sorted(before_dir.glob("*.json"))
    for extra in sorted(after_dir.glob("*.json")):
        if not (before_dir / extra.name).exists():
            print(f"{extra.name}: missing in {before_dir}")
            bad += 1
    for path in files:
        other = after_dir / path.name
        if not other.exists():
            print(f"{path.name}: missing in {after_dir}")
            bad += 1
            continue
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in (path, other))
        if "per_query" not in before or "per_query" not in after:
            print(f"{path.name}: no per_query (not a loop.py report): not compared")
            bad += 1
            continue
        lacking = without_whole_verdicts(before) + without_whole_verdicts(after)
        if lacking:
            print(
                f"{path.name}: {lacking} iterations without whole verdicts (an older "
                "loop.py --json): rerun it to compare verdicts"
            )
            bad += 1
            continue
        found = differences(before, after)
        old, new = before.get("corrective", {}), after.get("corrective", {})
        figures = " ".join(
            f"{k}={old[k]:.3f}/{new.get(k, float('nan')):.3f}" for k in FIGURES if k in old
        )
        print(f"{path.name}: {'SAME' if not found else f'{len(found)} differ'} {figures}")
        for line in found[:SHOWN]:
            print(f"  {line}")
        bad += bool(found)
    if not files:
        print(f"no JSON files in {before_dir}")
        return 1
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="folder of loop.py --json reports")
    parser.add_argument("after", type=Path, help="folder of the same reports from the other tree")
    args = parser.parse_args(argv)
    return 1 if compare(args.before, args.after) else 0


if __name__ == "__main__":
    sys.exit(main())
