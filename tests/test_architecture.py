"""Imports inside `esper/` follow the dependency order of DESIGN.md.

DESIGN.md: "Dependencies point one way: `leyline` <- `kasmina` <- `tolaria`/`tamiyo` <- `simic`; `nissa` depends
only on `leyline`. Nothing imports `simic` except the CLI."

Where `tasks` sits (DESIGN.md does not say): beside `kasmina`, one step above `leyline`. `tasks` is data and host
presets; it needs only `leyline` (its atomic writer, `esper.leyline.files`). `kasmina` does not import `tasks`:
`MorphogeneticModel` grows any `nn.Module` at named submodules (a conv host only declares its `.block_names` and an
`example_input()`), so the seed machinery does not depend on which hosts exist, and the hosts do not depend on seeds. Everything above them
(`tolaria`, `tamiyo`, `simic`, `cli`) may use both.

`esper.leyline.files` (atomic writes, output checks) is part of `leyline`, so every subsystem may import it.

The check reads every `esper/**/*.py` with `ast` (nothing is imported), takes every import in it, module level or
inside a function, absolute (`esper.X...`) or relative (`.x`, `..X`, `from .. import X`), maps both ends to their
subsystem and asserts that each edge between two subsystems is in `ALLOWED`. Imports inside one subsystem are always
allowed. Notebook cells that are not exported (tests, examples) are not library code and are not checked.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = "esper"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: subsystem -> the subsystems it may import. Mirrors DESIGN.md; change DESIGN.md first.
ALLOWED: dict[str, set[str]] = {
    "leyline": set(),                                                   # the contracts import nothing of Esper
    "tasks": {"leyline"},                                               # data and hosts: the atomic writer only
    "kasmina": {"leyline"},                                             # seeds work on any host: no `tasks`
    "tolaria": {"leyline", "kasmina", "tasks"},
    "tamiyo": {"leyline", "kasmina", "tolaria", "tasks"},
    "simic": {"leyline", "kasmina", "tolaria", "tamiyo", "tasks", "nissa"},  # all but the CLI
    "nissa": {"leyline"},
    "cli": {"leyline", "kasmina", "tolaria", "tamiyo", "simic", "nissa", "tasks"},  # the top: all
}
#: the top-level `esper/__init__.py` and `esper/_modidx.py`: the package's face (nbs/esper.ipynb) re-exports the few
#: names a user needs, `PPO` among them: beside the CLI it is the one place above simic, and nothing imports it
TOP = "<esper>"
ALLOWED[TOP] = {"kasmina", "tamiyo", "tasks", "simic"}


def subsystem_of_file(path: Path) -> str:
    "The subsystem a file of the package belongs to (`TOP` for files directly in `esper/`)."
    parts = path.relative_to(ROOT).parts
    if len(parts) == 1:
        return TOP
    return parts[0]


def module_of_file(path: Path) -> list[str]:
    "The dotted package a file's relative imports start from: `esper/simic/agent/ppo.py` -> ['esper', 'simic', 'agent']."
    return [PACKAGE, *path.relative_to(ROOT).parent.parts]


def imported_modules(tree: ast.AST, package: list[str]) -> list[tuple[int, str]]:
    "(line, absolute dotted name) of every import in `tree`; `from A import b` yields `A.b` (b may be a module)."
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module.split(".")
            else:
                up = node.level - 1
                if up >= len(package):
                    raise ValueError(f"line {node.lineno}: relative import climbs above the package")
                start = package[:len(package) - up]
                base = start + (node.module.split(".") if node.module else [])
            for alias in node.names:
                found.append((node.lineno, ".".join(base + [alias.name])))
    return found


def subsystem_of_module(name: str) -> str|None:
    "The subsystem an absolute module name belongs to; None outside the package."
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    if len(parts) == 1 or parts[1] not in ALLOWED:
        return TOP  # `import esper`, `from esper import __version__`
    return parts[1]


def wrong_way_imports(source: str, path: Path) -> list[str]:
    "Every import in `source` (the text of `path`) that the table does not allow, as 'file:line: a -> b (name)'."
    src = subsystem_of_file(path)
    tree = ast.parse(source, filename=str(path))
    bad = []
    for line, name in imported_modules(tree, module_of_file(path)):
        dst = subsystem_of_module(name)
        if dst is None or dst == src or dst == TOP:  # `esper/__init__.py` holds only the version
            continue
        if dst not in ALLOWED[src]:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {src} -> {dst} ({name})")
    return bad


def package_files() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_every_subsystem_is_in_the_table():
    found = {subsystem_of_file(p) for p in package_files()}
    assert found == set(ALLOWED), f"subsystems not in ALLOWED: {found - set(ALLOWED)}; gone: {set(ALLOWED) - found}"
    for src, dsts in ALLOWED.items():
        assert dsts <= set(ALLOWED), f"{src} names unknown subsystems: {dsts - set(ALLOWED)}"
        assert src not in dsts, f"{src} lists itself"


def test_the_table_has_no_cycles():
    "A one-way order: following allowed edges never leads back to where it started."
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in ALLOWED[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    for s in ALLOWED:
        assert s not in reach(s), f"cycle through {s}"


def test_only_the_cli_and_the_face_import_simic():
    "Read from the code, not from the table: outside simic itself, the files that import simic are the CLI's and the face."
    importers = {
        subsystem_of_file(p)
        for p in package_files()
        for _, name in imported_modules(ast.parse(p.read_text(encoding="utf-8")), module_of_file(p))
        if subsystem_of_module(name) == "simic"
    }
    assert importers - {"simic"} == {"cli", TOP}, importers


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_imports_follow_the_dependency_order(path):
    bad = wrong_way_imports(path.read_text(encoding="utf-8"), path)
    assert not bad, "imports against the dependency order of DESIGN.md:\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "from ..tolaria.trainer import validate",        # relative, into a module
    "from .. import tolaria",                        # relative, the package itself
    "from esper.tolaria import validate",            # absolute
    "import esper.simic.agent.ppo",                  # plain import
    "def f():\n    from esper.simic import PPOAgent", # inside a function
])
def test_the_check_sees_a_wrong_way_import(source):
    bad = wrong_way_imports(source, ROOT / "kasmina" / "model.py")
    assert len(bad) == 1 and "kasmina -> " in bad[0], bad


@pytest.mark.parametrize("source", [
    "from ..leyline import SeedStage",
    "from .slot import SeedSlot",
    "from . import slot",
    "import torch",
    "from esper import __version__",
])
def test_the_check_allows_the_right_way(source):
    assert wrong_way_imports(source, ROOT / "kasmina" / "model.py") == []


@pytest.mark.parametrize("source, bad", [
    ("from ...leyline import SeedStage", False),      # up two packages: esper.leyline
    ("from ..envs.env import act", False),            # another group of the same subsystem
    ("from .ppo import PPOAgent", False),
    ("from ...cli import main", True),                # esper.cli: against the order
    ("from ... import cli", True),
])
def test_the_check_reads_relative_imports_in_a_nested_package(source, bad):
    "A file of a group package (`esper/simic/agent/`) belongs to its subsystem; its relative imports start there."
    found = wrong_way_imports(source, ROOT / "simic" / "agent" / "ppo.py")
    assert (len(found) == 1 and "simic -> cli" in found[0]) if bad else found == [], found
