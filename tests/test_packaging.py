import ast
import configparser
import email.message
import email.parser
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config


def test_one_python_floor_everywhere():
    """python_requires, the lowest classifier, mypy's and ruff's targets name the same Python."""
    config = _setup_cfg()
    floor = re.fullmatch(r">=\s*3\.(\d+)", config["options"]["python_requires"].strip())
    assert floor is not None
    minor = int(floor.group(1))
    classified = [
        int(m) for m in re.findall(r"Python :: 3\.(\d+)", config["metadata"]["classifiers"])
    ]
    assert minor == min(classified)
    assert f"3.{minor}" == config["mypy"]["python_version"].strip()
    ruff = (ROOT / "ruff.toml").read_text(encoding="utf-8")
    assert [f"py3{minor}"] == re.findall(r'^target-version\s*=\s*"(\w+)"', ruff, re.MULTILINE)


def test_test_extra_refers_to_the_other_extras_without_repeating_their_pins():
    """The test extra names the optional extras it needs instead of copying their requirements."""
    extras = _setup_cfg()["options.extras_require"]
    test = [line.strip() for line in extras["test"].splitlines() if line.strip()]
    refs = [line for line in test if line.startswith("corrective_rag[")]
    assert 1 == len(refs)
    assert {"fast", "local-llm", "plot"} <= set(refs[0][len("corrective_rag[") : -1].split(","))
    for name in set(extras) - {"test", "dev"}:
        for requirement in extras[name].splitlines():
            if requirement.strip():
                assert requirement.strip() not in test, requirement


def _requirement_names(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)", line)
        if match:
            names.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return names


def test_every_library_the_benchmarks_import_is_declared():
    """Each third-party module benchmarks/ imports comes from a core requirement or an extra.

    (`bench` holds what only benchmarks use; `--engine ray` or `--backend qdrant` need those
    backends' own extras.)
    """
    config = _setup_cfg()
    declared = _requirement_names(config["options"]["install_requires"])
    for extra in config["options.extras_require"].values():
        declared |= _requirement_names(extra)
    # torch arrives with sentence-transformers, a core requirement; benchmarks only set its threads.
    declared.add("torch")
    modules = set()
    for path in (ROOT / "benchmarks").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    modules -= set(sys.stdlib_module_names) | {"benchmarks", "corrective_rag"}
    modules -= {path.stem for path in (ROOT / "scripts").glob("*.py")}  # the repository's own
    distributions = importlib.metadata.packages_distributions()
    for module in sorted(modules):
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [module])}
        assert names & declared, module


def test_version_flag_prints_the_package_version(capsys):
    """`corrective-rag --version` prints the program and the package's version and exits 0."""
    from corrective_rag import __version__
    from corrective_rag.cli.main import main

    assert 0 == main(["--version"])
    assert f"corrective-rag {__version__}\n" == capsys.readouterr().out


_NOT_SOURCE = shutil.ignore_patterns(
    ".git", "__pycache__", "*.egg-info", ".*_cache", "build", "dist", ".venv", "mutants"
)


def _backend(tmp_path: Path, hook: str) -> Path:
    """Run setuptools' PEP 517 ``hook`` on a copy of the checkout (the installed setuptools, no
    network); returns what it wrote, under ``tmp_path / "out"``."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=_NOT_SOURCE)
    (tmp_path / "out").mkdir()
    call = f"from setuptools import build_meta; print(build_meta.{hook}({str(tmp_path / 'out')!r}))"
    done = subprocess.run(
        [sys.executable, "-c", call],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    return tmp_path / "out" / done.stdout.strip().splitlines()[-1]


def _built_metadata(tmp_path: Path) -> email.message.Message:
    """The core metadata setuptools writes for the wheel."""
    info = _backend(tmp_path, "prepare_metadata_for_build_wheel") / "METADATA"
    return email.parser.Parser().parsestr(info.read_text(encoding="utf-8"))


def test_the_mit_licence_is_shipped_and_declared(tmp_path):
    """A LICENSE file holds the MIT text, and the metadata declares it as PEP 639 does: a
    `License-Expression: MIT` with the file, no legacy `License` field, no License classifier
    (retired beside an expression), and the build backend pinned to a setuptools that writes it
    (76 silently wrote no licence at all)."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "corrective_rag contributors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    metadata = _built_metadata(tmp_path)
    assert ("MIT", ["LICENSE"], None) == (
        metadata["License-Expression"],
        metadata.get_all("License-File"),
        metadata["License"],
    )
    assert [] == [c for c in metadata.get_all("Classifier") if c.startswith("License ::")]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"setuptools>=77.0.3"' in pyproject


def test_a_packager_finds_what_pyroma_looks_for(tmp_path):
    """pyroma rates the package 10/10 (author and contact, project URL, keywords, development
    status, licence, summary, README), from the metadata it builds as `pyroma .` does."""
    pytest.importorskip("pyroma")
    from pyroma import projectdata, ratings

    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=_NOT_SOURCE)
    data = projectdata.get_data(str(tree))
    assert (10, []) == ratings.rate(data)


def test_the_sdist_ships_the_package_and_no_tests(tmp_path):
    """The source tarball holds every module of the package, py.typed, the reference vectors,
    LICENSE, README and CHANGELOG, and no test file (the tests need the whole checkout, so it
    ships none)."""
    with tarfile.open(_backend(tmp_path, "build_sdist")) as tar:
        shipped = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    package = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "corrective_rag").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert package <= shipped
    assert {"LICENSE", "README.md", "CHANGELOG.md", "corrective_rag/py.typed"} <= shipped
    assert "corrective_rag/models/reference_vectors.json" in shipped  # the export's check
    assert [] == sorted(p for p in shipped if p.startswith(("tests/", "benchmarks/", "scripts/")))
    assert [] == sorted(p for p in shipped if p.endswith((".pyc", "conftest.py")))
