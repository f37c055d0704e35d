"""Which operators a change touches, and why: a pure function over the changed files and the
tree at the commit (its paths and the sources it asks for), for this repository's layout and
FlagGems'.

An operator is what `/test` names: a pytest marker of the checkout. It is selected when
- one of its **own files** changed: this repository's `kernels/ops/<op>/…`,
  `kernels/backends/_<vendor>/ops/<op>/…`, `kernels/benchmark/<op>.py`; FlagGems'
  `src/flag_gems/ops/<module>.py`, `src/flag_gems/fused/<module>.py` and
  `src/flag_gems/runtime/backend/_<vendor>/ops/<module>.py`,
  whose operators are the markers the module defines a function for (or its own name:
  `cummax.py` serves `cummax` and `cummaxmin_backward` where it defines both);
- **shared code** changed that its own files import, directly or through other modules of the
  package (an import graph read from the sources); a package's `__init__.py` whose changed
  lines name operators (a registration, FlagGems' `("cummax", cummax)`) selects just those;
- **its tests** changed: the markers of the test functions whose lines changed in a test or
  benchmark file, with the module's `pytestmark`; a change outside every test (a helper, a
  fixture, a constant) or with unknown lines, the whole file's.
A repository's own **rules** (a path glob → operators, from its settings file) cover what
neither can see, such as a table loaded by name. Everything else changed is listed as touching
no operator.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workflows.spec import FLAGGEMS, WorkflowSpec

Lines = tuple[tuple[int, int], ...]  # changed line ranges of the new file, inclusive

OWN_PATTERNS = (  # a leading `_` is the package's shared code (`kernels/ops/_adaptive.py`)
    re.compile(r"^kernels/ops/(?P<op>[a-z0-9][a-z0-9_]*)(/|\.py$)"),
    re.compile(r"^kernels/backends/_[a-z0-9_]+/ops/(?P<op>[a-z0-9][a-z0-9_]*)(/|\.py$)"),
    re.compile(r"^kernels/benchmark/(?P<op>[a-z0-9][a-z0-9_]*)\.py$"),
)
MODULE_PATTERNS = (  # a module whose operators are what it defines (FlagGems), not a package's
    re.compile(r"^src/flag_gems/(?:ops|fused)/(?!__init__)(?P<module>[A-Za-z0-9_]+)\.py$"),
    re.compile(  # a vendor's, or a vendor chip's (`_enflame/gcu400/ops/`)
        r"^src/flag_gems/runtime/backend/_[a-z0-9_]+/(?:[a-z0-9_]+/)?ops/"
        r"(?!__init__)(?P<module>[A-Za-z0-9_]+)\.py$"
    ),
)
PACKAGE_ROOTS = ("kernels", "src")  # where imports are resolved: `kernels.x`, `flag_gems.x`
TEST_DIRS = ("tests/", "benchmark/")
# pytest's own markers and its usual plugins': never an operator.
NOT_OPERATORS = frozenset({
    "parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout",
    "flaky", "asyncio", "anyio", "tryfirst", "trylast", "hookwrapper", "order", "dependency",
})  # fmt: skip


@dataclass(frozen=True)
class Changed:
    """A changed file: its path at the commit (the old one for a removal), the path it was
    renamed from, and the changed lines of the new file where known."""

    path: str
    previous: str | None = None
    lines: Lines | None = None
    removed: bool = False


@dataclass
class Selection:
    """The operators chosen, each with why (file → reason), and the files that chose none."""

    operators: dict[str, list[str]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)

    def add(self, op: str, why: str) -> None:
        reasons = self.operators.setdefault(op, [])
        if why not in reasons:
            reasons.append(why)


@dataclass(frozen=True)
class Rule:
    """A repository's own rule: a change to a path matching one of `paths` (globs: `*` within
    a folder, `**` across folders) selects `operators`."""

    paths: tuple[str, ...]
    operators: tuple[str, ...]


def select_for_workflow(
    changed: Sequence[Changed],
    paths: Sequence[str],
    read: Callable[[str], str | None],
    workflow: WorkflowSpec,
    rules: Sequence[Rule] = (),
) -> Selection:
    """The operators `changed` touches in the tree of `paths`, and why. The operators are the
    markers of the tests the workflow's accuracy step runs for the tree's layout (this
    repository's `tests/kernels`; FlagGems' `tests/` and `benchmark/`) that name an operator
    of the tree; only those tests' changes select by the lines that changed."""
    flaggems = any(p.startswith(("src/flag_gems/", "flag_gems/")) for p in paths)
    steps = workflow.steps_for(FLAGGEMS if flaggems else None)
    argv = [a for step in steps if step.kind == "accuracy" for a in step.argv]
    roots = tuple(r.rstrip("/") + "/" for r in accuracy_roots(argv, paths)) or TEST_DIRS
    used = set().union(
        *(markers(read(p)) for p in paths if p.startswith(roots) and p.endswith(".py"))
    )
    # Tests outside the step's directories (this repository's tests/e2e) name no operator.
    outside = [c for c in changed if c.path.startswith(TEST_DIRS) and not c.path.startswith(roots)]
    inside = [c for c in changed if c not in outside]
    # An operator: a marker of those tests that names an operator of the tree (one with own
    # files), not a marker of another kind (`gpu`, `plumbing`).
    known = (used & candidates(paths, read)) - NOT_OPERATORS
    chosen = select(inside, paths, read, known)
    if rules:
        chosen = apply_rules(chosen, changed, rules)
    chosen.unmatched = sorted([*chosen.unmatched, *(c.path for c in outside)])
    return chosen


def accuracy_argv(workflow: WorkflowSpec) -> tuple[tuple[str, ...], ...]:
    """The accuracy steps' argv of every layout of a workflow: what the selection reads of it
    (two workflows with the same select the same operators)."""
    layouts = [workflow.steps, *(workflow.layouts[k] for k in sorted(workflow.layouts))]
    return tuple(tuple(step.argv) for steps in layouts for step in steps if step.kind == "accuracy")


def accuracy_roots(argv: Sequence[str], paths: Sequence[str]) -> list[str]:
    """The test directories an accuracy step's argv names (those the tree has), or none."""
    dirs = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    every = {"/".join(d.split("/")[: i + 1]) for d in dirs for i in range(d.count("/") + 1)}
    return [a for a in argv if "{" not in a and not a.startswith("-") and a.rstrip("/") in every]


def apply_rules(found: Selection, changed: Sequence[Changed], rules: Sequence[Rule]) -> Selection:
    """`found` with what the repository's rules add; a file a rule matches is no longer
    unmatched."""
    matched: set[str] = set()
    for change in changed:
        for path in filter(None, (change.path, change.previous)):
            for rule in rules:
                glob = next((g for g in rule.paths if glob_pattern(g).match(path)), None)
                if glob is None:
                    continue
                matched.add(change.path)
                for op in rule.operators:
                    found.add(op, f"{path}: the repository's rule `{glob}`")
    found.operators = dict(sorted(found.operators.items()))
    found.unmatched = [p for p in found.unmatched if p not in matched]
    return found


@functools.lru_cache(maxsize=256)
def glob_pattern(glob: str) -> re.Pattern[str]:
    """A path glob as a regular expression: `**/` any folders (none too), `**` anything, `*`
    anything within a folder, `?` one character of a name; the rest literal."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def select(
    changed: Sequence[Changed],
    paths: Iterable[str],
    read: Callable[[str], str | None],
    operators: Iterable[str],
) -> Selection:
    """The operators among `operators` (the checkout's markers) that `changed` touches in the
    tree of `paths` (its files at the commit), `read` giving a file's source."""
    known = set(operators)
    files = sorted(set(paths))
    graph = _import_graph(files, read)
    owners = _own_files(files, read, known)
    found = Selection()
    for change in changed:
        hit = False
        for path in filter(None, (change.path, change.previous)):
            for op in owners.get(path, ()):
                found.add(op, f"{path}: its own file")
                hit = True
            if path.startswith(TEST_DIRS) and path.endswith(".py") and not change.removed:
                for op in _tested(read(path), change.lines, known):
                    found.add(op, f"{path}: its tests changed")
                    hit = True
            named = _registered(read(path), change.lines, known) if _is_init(path) else []
            for op in named:  # a registration: `("cummax", cummax)` added to a package
                found.add(op, f"{path}: registers it")
                hit = True
            if path in graph.modules and path not in owners and not named:
                for owner in sorted(_importers(graph, path) & owners.keys()):
                    for op in owners[owner]:
                        found.add(op, f"{path}: imported by {owner}")
                        hit = True
        if not hit:
            found.unmatched.append(change.path)
    found.operators = dict(sorted(found.operators.items()))
    return found


def _is_init(path: str) -> bool:
    return path.endswith("/__init__.py")


def _registered(source: str | None, lines: Lines | None, known: set[str]) -> list[str]:
    """The operators named on the changed lines of a package's `__init__.py` (the lines that
    register or re-export them); none where the lines are not known."""
    if source is None or not lines:
        return []
    text = source.splitlines()
    names: set[str] = set()
    for first, last in lines:
        for line in text[max(first - 1, 0) : last]:
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)
            names |= {w.lstrip("_") for w in words} | set(words)
    return sorted(names & known)


def _owned_names(path: str, read: Callable[[str], str | None]) -> set[str]:
    """The operator names `path` could be an own file of: its operator folder's (this
    repository), or an operator module's own name and the functions it defines (FlagGems)."""
    for pattern in OWN_PATTERNS:
        match = pattern.match(path)
        if match:
            return {match["op"]}
    for pattern in MODULE_PATTERNS:
        match = pattern.match(path)
        if match:
            return _defined(read(path)) | {match["module"].lstrip("_")}
    return set()


def _own_files(
    files: Sequence[str], read: Callable[[str], str | None], known: set[str]
) -> dict[str, list[str]]:
    """Each own file of an operator → the operators it serves."""
    owners: dict[str, list[str]] = {}
    for path in files:
        ops = sorted(_owned_names(path, read) & known)
        if ops:
            owners[path] = ops
    return owners


def candidates(paths: Iterable[str], read: Callable[[str], str | None]) -> set[str]:
    """The names an operator of the tree could have (see `_owned_names`)."""
    return set().union(*(_owned_names(path, read) for path in paths))


def markers(source: str | None) -> set[str]:
    """Every `pytest.mark.<name>` a module's source uses."""
    return set(_facts(source).marks) if source is not None else set()


def _defined(source: str | None) -> set[str]:
    """The names a module defines at its top level (functions, and their leading `_` off)."""
    return set(_facts(source).defined) if source is not None else set()


@dataclass(frozen=True)
class _Facts:
    """What the selection asks of a module's source, read in one parse: its imports
    (module, level, names), the functions it defines, the markers it uses."""

    imports: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    defined: frozenset[str] = frozenset()
    marks: frozenset[str] = frozenset()


_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.M)
_MARK_USE = re.compile(r"\bmark\.([A-Za-z_]\w*)")
_COMMENT = re.compile(r"#[^\n]*")
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]+))",
    re.M,
)
_FACTS_KEPT = 16384


def _facts(source: str) -> _Facts:
    """A module's facts, cached by a digest of its text (a tree's files repeat from commit to
    commit; the text itself is not kept)."""
    key = hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    found = _FACTS.get(key)
    if found is None:
        found = _read_facts(source)
        if len(_FACTS) >= _FACTS_KEPT:
            _FACTS.pop(next(iter(_FACTS)))
        _FACTS[key] = found
    return found


_FACTS: dict[bytes, _Facts] = {}


def _read_facts(source: str) -> _Facts:
    """The facts by pattern, not by parsing: a tree has thousands of modules and parsing them
    all takes seconds. Top-level `def`s start a line; an import statement starts a line (a
    parenthesised list may run over several); markers are `mark.<name>` outside comments. A line
    inside a string that looks like one counts too: it can only add an operator, never lose
    one."""
    defined = set()
    for name in _DEF.findall(source):
        defined |= {name, name.lstrip("_")}
    imports: list[tuple[str, int, tuple[str, ...]]] = []
    for dots, module, names, plain in _IMPORT.findall(source):
        if plain:
            imports += [(_first_word(part), 0, ()) for part in plain.split(",")]
        else:
            names = _COMMENT.sub("", names).strip().strip("()")
            listed = tuple(_first_word(part) for part in names.split(","))
            imports.append((module, len(dots), tuple(n for n in listed if n and n != "*")))
    imports = [i for i in imports if i[0] or i[1]]
    marks = _MARK_USE.findall(_COMMENT.sub("", source)) if "mark." in source else []
    return _Facts(tuple(imports), frozenset(defined), frozenset(marks))


def _first_word(text: str) -> str:
    """`  os.path as p \\` → `os.path`."""
    words = text.replace("\\", " ").split()
    return words[0] if words else ""


@dataclass
class _Graph:
    modules: dict[str, str]  # path → dotted name
    importers: dict[str, set[str]]  # path → the paths that import it


def _module_name(path: str) -> str | None:
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[0] == "src":
        parts = parts[1:]
    elif parts[0] not in PACKAGE_ROOTS:
        return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts else None


def _import_graph(files: Sequence[str], read: Callable[[str], str | None]) -> _Graph:
    modules = {p: name for p in files if (name := _module_name(p))}
    by_name = {name: p for p, name in modules.items()}
    importers: dict[str, set[str]] = {}
    for path, name in modules.items():
        source = read(path)
        if source is None:
            continue
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for target in _imports_of(source, package):
            while target and target not in by_name:
                target = target.rpartition(".")[0]
            if target and by_name[target] != path:
                importers.setdefault(by_name[target], set()).add(path)
    return _Graph(modules, importers)


def _imports_of(source: str, package: str) -> Iterable[str]:
    """What a module's source imports, as dotted names: a `from` import's module and each of
    its names (a name may be a module), relative ones resolved against `package`."""
    for module, level, names in _facts(source).imports:
        if not level and not names:
            yield module
            continue
        base = module
        if level:
            anchor = package.split(".")[: max(0, len(package.split(".")) - level + 1)]
            base = ".".join([*anchor, module] if module else anchor)
        yield base
        yield from (f"{base}.{name}" for name in names)


def _importers(graph: _Graph, path: str) -> set[str]:
    """Every module that imports `path`, directly or through others."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        for importer in graph.importers.get(todo.pop(), ()):
            if importer not in seen:
                seen.add(importer)
                todo.append(importer)
    return seen


def _tested(source: str | None, lines: Lines | None, known: set[str]) -> list[str]:
    """The operators whose tests in `source` the changed `lines` touch: a test's own markers
    and its module's `pytestmark`; a change outside every test (a helper, a fixture, the
    imports) touches all of the file's."""
    tree = _parse(source)
    if tree is None:
        return []
    module_ops: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module_ops |= _marks(node.value) & known
    tests = []  # (first line, last line, operators) of each test function or class
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not node.name.startswith(("test", "Test")):
                continue
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            own = set().union(*(_marks(d) for d in node.decorator_list)) & known
            tests.append((start, node.end_lineno or node.lineno, own | module_ops))
    every = module_ops.union(*(ops for _, _, ops in tests))
    if lines is None:
        return sorted(every)
    found: set[str] = set()
    for first, last in lines:
        hit = [ops for start, end, ops in tests if first <= end and last >= start]
        found |= set().union(*hit) if hit else every
    return sorted(found)


def _marks(node: ast.AST) -> set[str]:
    """The `pytest.mark.<name>` names in a decorator or a `pytestmark` value."""
    names = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "mark"
        ):
            names.add(sub.attr)
    return names


def _parse(source: str | None) -> ast.Module | None:
    if source is None:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a pull request's file
        return None


def changed_lines(diff: str) -> Mapping[str, Lines]:
    """The new file's changed line ranges, per path, from `git diff -U0` output."""
    found: dict[str, list[tuple[int, int]]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            path = None if name == "/dev/null" else posixpath.normpath(name.removeprefix("b/"))
        elif line.startswith("@@") and path is not None:
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", line)
            if match:
                start, count = int(match[1]), int(match[2] or 1)
                # A pure removal (count 0) touches the line it was removed after.
                found.setdefault(path, []).append((max(start, 1), start + max(count, 1) - 1))
    return {p: tuple(r) for p, r in found.items()}


def patch_lines(patch: str | None) -> Lines | None:
    """The new file's changed line ranges from one file's patch as GitHub's files API gives it
    (hunks with context); None when there is none (a binary file, a patch too large)."""
    if not patch:
        return None
    found: list[tuple[int, int]] = []
    line = 0
    for text in patch.splitlines():
        if text.startswith("@@"):
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", text)
            line = int(match[1]) if match else line
        elif text.startswith("+"):
            found.append((line, line))
            line += 1
        elif text.startswith("-"):
            # A removal touches the line it was removed before (or the last one).
            found.append((max(line, 1), max(line, 1)))
        elif not text.startswith("\\"):  # "\ No newline at end of file"
            line += 1
    merged: list[tuple[int, int]] = []
    for first, last in sorted(set(found)):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    return tuple(merged)
