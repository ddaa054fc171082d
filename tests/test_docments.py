"""Every parameter comment reaches the docs: fastcore's `docments` (which `show_doc` uses) reads each `# comment` on a
parameter's own line, and drops one that a formatter moved onto the closing `):` line. This walks every exported
function and method and fails on a comment in a signature that `docments` does not return."""
import importlib
import inspect
import io
import pkgutil
import textwrap
import tokenize

import pytest
from fastcore.docments import docments

import esper


def exported_functions():
    "(qualified name, function) for every function and method the package exports."
    seen = set()
    for info in pkgutil.walk_packages(esper.__path__, "esper."):
        if info.name.endswith("_modidx"):
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:  # an optional extra (Ray) that is not installed
            continue
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name, None)
            funcs = []
            if inspect.isfunction(obj):
                funcs.append((f"{info.name}.{name}", obj))
            elif inspect.isclass(obj) and obj.__module__ == mod.__name__:
                funcs += [(f"{info.name}.{name}.{k}", v) for k, v in vars(obj).items()
                          if inspect.isfunction(v) and (not k.startswith("_") or k == "__init__")]
            for qual, f in funcs:
                written = f.__code__.co_filename.endswith(".py")  # not generated (a dataclass's __init__)
                if written and f.__module__.startswith("esper") and id(f) not in seen:
                    seen.add(id(f))
                    yield qual, f


def signature_comments(f) -> list[str]:
    "The comments in `f`'s signature, up to the end of the line that closes it."
    src = textwrap.dedent(inspect.getsource(f))
    comments, depth, started = [], 0, False
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT and not tok.line.lstrip().startswith("*"):  # docments skips *args, **kwargs
            comments.append(tok.string.lstrip("# ").strip())
        elif tok.type == tokenize.OP and tok.string in "([{":
            depth, started = depth + 1, True
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.NEWLINE and started and depth == 0:
            break
    return comments


FUNCTIONS = list(exported_functions())


def test_the_walk_finds_the_package():
    names = {q for q, _ in FUNCTIONS}
    assert "esper.leyline.files.write_json_atomic" in names and "esper.leyline.files.RunLock.__init__" in names
    assert len(FUNCTIONS) > 300


@pytest.mark.parametrize("qual, f", FUNCTIONS, ids=[q for q, _ in FUNCTIONS])
def test_every_parameter_comment_reaches_docments(qual, f):
    if f.__code__.co_name == "<lambda>":
        return
    documented = {v for v in docments(f).values() if v}
    lost = [c for c in signature_comments(f) if c and c not in documented]
    assert not lost, f"{qual}: comments docments drops (put each on its parameter's own line): {lost}"
