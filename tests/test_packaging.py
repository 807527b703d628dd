import ast
import configparser
import importlib.metadata
import re
import sys
from pathlib import Path

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
    distributions = importlib.metadata.packages_distributions()
    for module in sorted(modules):
        names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [module])}
        assert names & declared, module
