"""Imports inside `esper/` follow the dependency rule of the developer guide.

The rule is written in `nbs/guide.ipynb`, section "The dependency rule": imports point one way, `leyline` <-
`kasmina`/`tasks` <- `tolaria` <- `tamiyo` <- `simic`; `nissa` depends only on `leyline`; the CLI and the package's
face sit on top, and nothing else imports `simic`. Inside `simic` the groups are layered too: `agent` <- `envs` <-
`trainers`. `ALLOWED` and `SIMIC_LAYERS` below are that section's table and layers; change both together.

The check reads every `esper/**/*.py` with `ast` (nothing is imported), takes every import in it, module level or
inside a function, absolute (`esper.X...`) or relative (`.x`, `..X`, `from .. import X`), maps both ends to their
subsystem and asserts that each edge between two subsystems is in `ALLOWED`. Imports inside one subsystem are
allowed, except that a module of a simic group never imports a group above its own. Notebook cells that are not
exported (tests, examples) are not library code and are not checked.

The same section of the guide says the command line is thin: `test_a_subcommand_parses_calls_and_prints` reads each
subcommand's module in `esper/cli/` and holds it to `add_parser`, `run` and short private helpers they need.
"""
import ast
import json
import re
from pathlib import Path

import pytest

PACKAGE = "esper"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: subsystem -> the subsystems it may import: the table of the guide's "The dependency rule"; change both together.
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
    assert not bad, "imports against the dependency rule (nbs/guide.ipynb, The dependency rule):\n" + "\n".join(bad)


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


#: the groups of `esper/simic/`, lowest first: a module imports from its own group and the groups below it
SIMIC_LAYERS = ("agent", "envs", "trainers")


def simic_layer_of_module(name: str) -> int | None:
    "Rank of the simic group a module name is in (`len(SIMIC_LAYERS)`: `esper.simic` itself, the face); None outside."
    parts = name.split(".")
    if parts[:2] != [PACKAGE, "simic"]:
        return None
    if len(parts) == 2:
        return len(SIMIC_LAYERS)  # `from esper.simic import X`: the face re-exports every group
    return SIMIC_LAYERS.index(parts[2]) if parts[2] in SIMIC_LAYERS else len(SIMIC_LAYERS)


def upward_simic_imports(source: str, path: Path) -> list[str]:
    "Every import in `source` (a file of a simic group) of a group above its own, as 'file:line: a -> b (name)'."
    parts = path.relative_to(ROOT).parts
    if parts[0] != "simic" or len(parts) < 3:
        return []  # not in a group: `esper/simic/__init__.py` is the face, above every group
    here = SIMIC_LAYERS.index(parts[1])
    bad = []
    for line, name in imported_modules(ast.parse(source, filename=str(path)), module_of_file(path)):
        there = simic_layer_of_module(name)
        if there is not None and there > here:
            to = SIMIC_LAYERS[there] if there < len(SIMIC_LAYERS) else "esper.simic"
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: simic.{parts[1]} -> {to} ({name})")
    return bad


def test_every_simic_group_is_a_layer():
    groups = {p.relative_to(ROOT / "simic").parts[0] for p in (ROOT / "simic").rglob("*.py")} - {"__init__.py"}
    assert groups == set(SIMIC_LAYERS), groups


@pytest.mark.parametrize("path", sorted((ROOT / "simic").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_no_simic_import_runs_up(path):
    bad = upward_simic_imports(path.read_text(encoding="utf-8"), path)
    assert not bad, "imports up the simic layers (agent <- envs <- trainers; nbs/guide.ipynb):\n" + "\n".join(bad)


@pytest.mark.parametrize("source, file, bad", [
    ("from ..trainers.checkpoint import check_resume_config", "agent/checkpoint.py", True),
    ("def f():\n    from esper.simic.trainers.vectorized import problem_slots", "envs/gym_env.py", True),
    ("from esper.simic import PPOAgent", "envs/env.py", True),    # the face sits above every group
    ("from ..envs import env", "agent/ppo.py", True),
    ("from ..agent.ppo import PPOAgent", "envs/lockstep.py", False),
    ("from ..envs.env import act", "trainers/vectorized.py", False),
    ("from .buffer import RolloutBuffer", "agent/ppo.py", False),
    ("from ...tamiyo.episode import Episode", "envs/env.py", False),
])
def test_the_check_sees_an_upward_simic_import(source, file, bad):
    found = upward_simic_imports(source, ROOT / "simic" / file)
    assert (len(found) == 1) if bad else found == [], found


GUIDE = ROOT.parent / "nbs" / "guide.ipynb"


def guide_table() -> dict[str, set[str]]:
    "The table of the guide's \"The dependency rule\": package -> the packages its row names (`everything`: all)."
    cells = ["".join(c["source"]) for c in json.loads(GUIDE.read_text(encoding="utf-8"))["cells"]]
    section = next(c for c in cells if c.startswith("## The dependency rule"))
    table = {}
    for row in re.findall(r"^\| (.+?) \| (.+?) \|$", section, flags=re.M):
        who, may = row
        names = re.findall(r"`([a-z_]+)`", may)
        if who.startswith("the face"):
            table[TOP] = set(names)
        elif who.strip("`") in ALLOWED:
            table[who.strip("`")] = set(ALLOWED) - {who.strip("`"), TOP} if may == "everything" else set(names)
    return table


def test_the_guide_states_the_table():
    "The rule a contributor reads is the rule this test holds."
    assert guide_table() == ALLOWED
    assert " ← ".join(f"`{g}`" for g in SIMIC_LAYERS) in GUIDE.read_text(encoding="utf-8")


# The CLI is thin (issue 77, item 2): a subcommand's module parses, calls the library and prints. What it may define
# is read from the code: `add_parser`, `run`, and private helpers that one of them needs (reached through the names
# they use), each at most `HELPER_LINES` long. A public function or a class is library code, or an internal that
# bench scripts and tutorials would come to import; an unreached helper is dead. The rule cannot tell a short piece of
# library code from a short helper of the command line: the length bound is the proxy for that, not a proof.
CLI = ROOT / "cli"
HELPER_LINES = 40
#: subcommand modules still thicker than the rule (a ratchet: a module over its entry fails, and so does one under
#: it until the entry is lowered): module -> the definitions the rule refuses
THICK: dict[str, set[str]] = {
    "ppo.py": {"annealing_line", "placement", "prepare_outputs", "_run_settings", "_train"},
}


def thick_definitions(source: str) -> dict[str, str]:
    "The definitions of a subcommand's module that the thin-CLI rule refuses, each with the reason."
    defs = {n.name: n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    uses = {k: {m.id for m in ast.walk(n) if isinstance(m, ast.Name)} & set(defs) for k, n in defs.items()}
    reached, todo = set(), [k for k in ("add_parser", "run") if k in defs]
    while todo:
        k = todo.pop()
        if k not in reached:
            reached.add(k)
            todo.extend(uses[k])
    refused = {}
    for name, node in defs.items():
        if name in ("add_parser", "run"):
            continue
        n_lines = node.end_lineno - node.lineno + 1
        if isinstance(node, ast.ClassDef):
            refused[name] = "a class: settings and jobs belong to the library"
        elif not name.startswith("_"):
            refused[name] = "public: a subcommand offers only add_parser and run"
        elif name not in reached:
            refused[name] = "neither add_parser nor run needs it"
        elif n_lines > HELPER_LINES:
            refused[name] = f"{n_lines} lines: a helper of the command line has at most {HELPER_LINES}"
    return refused


def subcommand_modules() -> list[Path]:
    "The modules of `esper/cli/` that register a subcommand (they define `add_parser`)."
    return [p for p in sorted(CLI.glob("*.py")) if "add_parser" in defined_names(p.read_text(encoding="utf-8"))]


def defined_names(source: str) -> set[str]:
    "The functions and classes a module defines at top level."
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_the_subcommands_are_found():
    assert {p.name for p in subcommand_modules()} >= {"baseline.py", "heuristic.py", "compare.py", "ppo.py"}
    assert set(THICK) <= {p.name for p in subcommand_modules()}, THICK


@pytest.mark.parametrize("path", subcommand_modules(), ids=lambda p: p.name)
def test_a_subcommand_parses_calls_and_prints(path):
    refused = thick_definitions(path.read_text(encoding="utf-8"))
    allowed = THICK.get(path.name, set())
    worse = {k: v for k, v in refused.items() if k not in allowed}
    assert not worse, f"{path.name}: library code in the command line (move it below the CLI): {worse}"
    assert set(refused) == allowed, f"{path.name} is thinner than THICK says: drop {allowed - set(refused)} from it"


HELPER = "def _helper(args):\n    return args.x\n"
PARSER = "def add_parser(s):\n    p = s.add_parser('x')\n    p.checks.append(_helper)\n    p.set_defaults(run=run)\n"
RUN = "def run(args):\n    print(work(args), _long(args))\n    return 0\n"  # names it needs, if defined


@pytest.mark.parametrize("extra, refused", [
    ("", {}),
    ("def work(args):\n    return 1\n", {"work": "public"}),
    ("class Job:\n    pass\n", {"Job": "a class"}),
    ("def _dead():\n    pass\n", {"_dead": "neither add_parser nor run"}),
    ("def _long(args):\n" + "    x = 1\n" * 40, {"_long": "41 lines"}),
])
def test_the_check_sees_library_code_in_a_subcommand(extra, refused):
    found = thick_definitions(PARSER + HELPER + RUN + extra)
    assert set(found) == set(refused), found
    assert all(found[k].startswith(v) for k, v in refused.items()), found
    inner = HELPER.replace("return args.x", "return _inner()") + "def _inner():\n    pass\n"
    assert thick_definitions(PARSER + inner + RUN) == {}  # a helper's helper is needed too
