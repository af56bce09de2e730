"""Mutation testing of the gate's pure modules: `invoke mutate` (issue 34).

A small in-house AST mutator (no new dependency): each mutant is one small change to one module
(a comparison flipped, `and` for `or`, a `not` dropped, a constant moved by one, a `return X`
made `return None`, an `if` negated, ...). Every mutant is written over that module in a copy
of src/ and the module's unit tests are run against the copy: a failing run (or one past the
timeout) kills the mutant; a passing run means no test noticed the change, and the survivor is
listed as `path:line description` for a developer to write the missing test (or to judge the
change equivalent: no behaviour can differ).

The score per module is killed/total; the exit status is 1 when a module scores below --min.
The core (`mutants`, `run`) is pure or confined to temporary directories; main() is the CLI.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

# The default module set (issue 34): each module with the unit test files that test it (those
# that import it, or judge hosts through it), most likely killers first (pytest runs with -x),
# and for a module with I/O parts, the pure functions and classes to mutate (None: all of it).
DEFAULT: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "src/racklift/verify/compare.py": (
        ("tests/unit/test_gate.py", "tests/unit/test_topology.py",
         "tests/unit/test_port_matching.py", "tests/unit/test_cabling.py",
         "tests/unit/test_real_world_output.py", "tests/unit/test_hostile_hosts.py"), None),
    "src/racklift/verify/health.py": (
        ("tests/unit/test_health_admission.py", "tests/unit/test_gate.py",
         "tests/unit/test_real_world_output.py"), None),
    "src/racklift/verify/acceptance.py": (
        ("tests/unit/test_acceptance_required.py", "tests/unit/test_acceptance_parsers.py",
         "tests/unit/test_hwemu_acceptance.py"), None),
    "src/racklift/verify/cabling.py": (
        ("tests/unit/test_cabling.py", "tests/unit/test_iblinkinfo.py"), None),
    "src/racklift/verify/pairing.py": (
        ("tests/unit/test_pairing.py", "tests/unit/test_accept_stage.py",
         "tests/unit/test_acceptance_parsers.py"), None),
    "src/racklift/verify/verdict.py": (
        ("tests/unit/test_verdict_hold.py", "tests/unit/test_gate.py",
         "tests/unit/test_terminal_output.py", "tests/unit/test_hostile_hosts.py",
         "tests/unit/test_real_world_output.py"),
        ("HostVerdict", "judge", "not_verified", "skipped", "journal_text", "target_status",
         "GATED")),
    # read_now, record and _last_journal read and write NetBox: left out; the module's
    # constants that the pure part reads are in.
    "src/racklift/verify/record_verdicts.py": (
        ("tests/unit/test_verdict_hold.py", "tests/unit/test_gate.py",
         "tests/unit/test_terminal_output.py", "tests/unit/test_hostile_hosts.py",
         "tests/unit/test_real_world_output.py"),
        ("recorded", "hold", "busy")),
    # The one rule for text that may quote a host (journal and terminal).
    "src/racklift/text.py": (
        ("tests/unit/test_verdict_hold.py", "tests/unit/test_hostile_hosts.py",
         "tests/unit/test_terminal_output.py"), None),
    "src/racklift/facts/xid.py": (
        ("tests/unit/test_parse_xid.py", "tests/unit/test_parse_kernel_log.py",
         "tests/unit/test_health_admission.py"), None),
}

# --- generation ------------------------------------------------------------------------------

_CMP_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
    ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE), ast.GtE: (ast.Gt, ast.Lt),
    ast.In: (ast.NotIn,), ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
           ast.And: "and", ast.Or: "or", ast.Add: "+", ast.Sub: "-"}
_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


@dataclass(frozen=True)
class Mutant:
    id: str  # M1, M2, ... in source order
    line: int
    description: str  # "L42: == → !="
    source: str  # the whole mutated module


@dataclass(frozen=True)
class _Site:
    """A node that can be changed, found again in a fresh tree by its traversal index."""

    index: int
    line: int
    description: str
    apply: Callable[[ast.AST, _Parent], None]


@dataclass(frozen=True)
class _Parent:
    node: ast.AST
    field: str
    position: int | None  # where in the field's list; None: the field is the node itself

    def replace(self, new: ast.AST) -> None:
        if self.position is None:
            setattr(self.node, self.field, new)
        else:
            getattr(self.node, self.field)[self.position] = new


def _is_docstring(node: ast.AST, parent: _Parent | None) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and parent is not None
            and parent.field == "body" and parent.position == 0
            and isinstance(parent.node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                         ast.AsyncFunctionDef)))


def _skipped(node: ast.AST, parent: _Parent | None) -> bool:
    """Never mutated, nor anything inside: docstrings, f-strings (messages), `__all__`,
    logging calls, `if TYPE_CHECKING:` and `if __name__ == "__main__":`."""
    if _is_docstring(node, parent) or isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        return (node.func.attr in _LOG_METHODS and isinstance(owner, ast.Name)
                and owner.id in {"log", "logger", "logging", "LOG"})
    if isinstance(node, ast.If):
        text = ast.unparse(node.test)
        return text in {"TYPE_CHECKING", "typing.TYPE_CHECKING", "__name__ == '__main__'"}
    return False


# Fields that hold type annotations: never walked.
_ANNOTATIONS = {"annotation", "returns", "type_comment"}


def _walk(node: ast.AST, parent: _Parent | None = None, scope: str = "",
          ) -> Iterator[tuple[ast.AST, _Parent | None, str]]:
    """Every node that may be mutated, in a fixed order, with its parent and its scope (the
    dotted name of the enclosing top-level definitions: `HostVerdict.failures`, or a
    module-level assignment's target)."""
    if _skipped(node, parent):
        return
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope = f"{scope}.{node.name}" if scope else node.name
    elif (not scope and isinstance(node, (ast.Assign, ast.AnnAssign))
          and isinstance(parent and parent.node, ast.Module)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        scope = ",".join(t.id for t in targets if isinstance(t, ast.Name))
    yield node, parent, scope
    if isinstance(node, ast.AnnAssign) and node.value is None:
        return  # a bare annotation (a dataclass field without default): nothing to run
    for name, value in ast.iter_fields(node):
        if name in _ANNOTATIONS or name == "decorator_list":
            continue
        if isinstance(value, list):
            for position, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield from _walk(item, _Parent(node, name, position), scope)
        elif isinstance(value, ast.AST):
            yield from _walk(value, _Parent(node, name, None), scope)


def _in_scope(scope: str, functions: Iterable[str] | None) -> bool:
    if functions is None:
        return True
    names = scope.split(",") if "," in scope else [scope]
    return any(n == f or n.startswith(f + ".") for f in functions for n in names if n)


def _constant_literal(node: ast.AST) -> bool:
    return (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) for e in node.elts))


def _string_operand(node: ast.BinOp) -> bool:
    return any(isinstance(o, ast.JoinedStr) or (isinstance(o, ast.Constant)
                                                and isinstance(o.value, str))
               for o in (node.left, node.right))


def _sites_of(node: ast.AST, parent: _Parent | None, index: int) -> Iterator[_Site]:
    line = getattr(node, "lineno", None) or getattr(parent and parent.node, "lineno", 0)

    def site(description: str, apply: Callable[[ast.AST, _Parent], None]) -> _Site:
        return _Site(index, line, f"L{line}: {description}", apply)

    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in _CMP_SWAPS[type(op)]:
                def swap(n: ast.AST, _p: _Parent, i: int = i, new: type = new) -> None:
                    n.ops[i] = new()
                yield site(f"{_SYMBOL[type(op)]} → {_SYMBOL[new]}", swap)
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And

        def boolop(n: ast.AST, _p: _Parent, new: type = new) -> None:
            n.op = new()
        yield site(f"{_SYMBOL[type(node.op)]} → {_SYMBOL[new]}", boolop)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and parent:
        yield site("not removed", lambda n, p: p.replace(n.operand))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield site(f"{node.value} → {not node.value}",
                   lambda n, _p: setattr(n, "value", not n.value))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield site(f"{node.value} → {node.value + 1}",
                   lambda n, _p: setattr(n, "value", n.value + 1))
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        yield site("return value → return None",
                   lambda n, _p: setattr(n, "value", ast.Constant(None)))
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (
            isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        kind = {ast.If: "if", ast.While: "while", ast.IfExp: "conditional"}[type(node)]
        yield site(f"{kind} condition negated",
                   lambda n, _p: setattr(n, "test", ast.UnaryOp(ast.Not(), n.test)))
    elif isinstance(node, (ast.Break, ast.Continue)) and parent:
        new = ast.Continue if isinstance(node, ast.Break) else ast.Break
        yield site(f"{type(node).__name__.lower()} → {new.__name__.lower()}",
                   lambda n, p, new=new: p.replace(new()))
    elif (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
          and not _string_operand(node)):
        new = ast.Sub if isinstance(node.op, ast.Add) else ast.Add

        def binop(n: ast.AST, _p: _Parent, new: type = new) -> None:
            n.op = new()
        yield site(f"{_SYMBOL[type(node.op)]} → {_SYMBOL[new]}", binop)
    if _constant_literal(node):
        for i, element in enumerate(node.elts):
            def drop(n: ast.AST, _p: _Parent, i: int = i) -> None:
                del n.elts[i]
            yield site(f"{element.value!r} dropped from the literal", drop)


def mutants(source: str, functions: Iterable[str] | None = None) -> list[Mutant]:
    """Every mutant of a module's source, in source order; `functions`: only inside these
    top-level functions, classes (`Class` or `Class.method`) or module-level assignments."""
    functions = tuple(functions) if functions is not None else None
    original = ast.unparse(ast.parse(source))
    sites = [s for index, (node, parent, scope) in enumerate(_walk(ast.parse(source)))
             if _in_scope(scope, functions) for s in _sites_of(node, parent, index)]
    found: list[Mutant] = []
    seen = {original}
    for s in sites:
        tree = ast.parse(source)
        for index, (node, parent, _) in enumerate(_walk(tree)):
            if index == s.index:
                s.apply(node, parent)
                break
        mutated = ast.unparse(ast.fix_missing_locations(tree))
        if mutated in seen:  # a change that unparses the same, or as another mutant did
            continue
        seen.add(mutated)
        found.append(Mutant(f"M{len(found) + 1}", s.line, s.description, mutated))
    return found


# --- running ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    killed: bool
    seconds: float
    timed_out: bool = False
    earlier: bool = False  # killed in the run --rerun names, not run again


@dataclass
class Report:
    module: str  # the module's path, as given
    tests: tuple[str, ...]
    functions: tuple[str, ...] | None
    outcomes: list[Outcome] = field(default_factory=list)
    baseline_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def killed(self) -> int:
        return sum(o.killed for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 100.0

    @property
    def survivors(self) -> list[Mutant]:
        return sorted((o.mutant for o in self.outcomes if not o.killed),
                      key=lambda m: (m.line, int(m.id[1:])))

    def line(self) -> str:
        return (f"{self.module}: {self.killed}/{self.total} killed ({self.score:.1f} %) "
                f"in {self.seconds:.0f} s")

    def to_dict(self) -> dict:
        return {"module": self.module, "tests": list(self.tests),
                "functions": list(self.functions) if self.functions is not None else None,
                "killed": self.killed, "total": self.total, "score": round(self.score, 1),
                "seconds": round(self.seconds, 1),
                "baseline_seconds": round(self.baseline_seconds, 1),
                "survivors": [{k: v for k, v in asdict(m).items() if k != "source"}
                              | {"where": f"{self.module}:{m.line}"}
                              for m in self.survivors]}


class BaselineFailed(RuntimeError):
    pass


class _Worker:
    """A copy of the package tree, in which one mutant at a time replaces the module."""

    def __init__(self, src: Path, base: Path):
        self.copy = base / "src"
        shutil.copytree(src, self.copy, ignore=shutil.ignore_patterns("__pycache__"))

    def run(self, relative: Path, text: str | None, tests: Sequence[str], cwd: Path,
            timeout: float | None) -> tuple[int | None, float, str]:
        """Run the tests with the module's text replaced by `text` (None: as it is), the file
        restored after; (exit status or None on timeout, seconds, output)."""
        target = self.copy / relative
        original = target.read_text()
        try:
            if text is not None:
                target.write_text(text)
            # A mutant can have the same size as the module and be written within the same
            # second: Python would take the stale bytecode as current.
            for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
                stale.unlink()
            return _pytest(self.copy, tests, cwd, timeout)
        finally:
            target.write_text(original)


def _pytest(pythonpath: Path, tests: Sequence[str], cwd: Path,
            timeout: float | None) -> tuple[int | None, float, str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    # racklift.paths finds the project tree from its own file: keep it the checkout's.
    env.setdefault("RACKLIFT_HOME", str(cwd))
    started = time.monotonic()
    proc = subprocess.Popen([PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                             *tests], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, time.monotonic() - started, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, time.monotonic() - started, out


def _relative(module: Path, src: Path) -> Path:
    try:
        return module.resolve().relative_to(src.resolve())
    except ValueError:
        raise SystemExit(f"{module} is not under {src}") from None


def _imported_from(copy: Path, relative: Path, cwd: Path) -> str:
    name = ".".join(relative.with_suffix("").parts)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run([PYTHON, "-c", f"import {name}; print({name}.__file__)"], cwd=cwd,
                          env=env, capture_output=True, text=True, check=True).stdout.strip()


def run(module: Path, tests: Sequence[str], *, src: Path, cwd: Path = ROOT, jobs: int = 1,
        functions: Iterable[str] | None = None, limit: int | None = None, seed: int = 0,
        timeout: float | None = None, name: str | None = None,
        rerun: Iterable[str] | None = None,
        progress: Callable[[Outcome, int, int], None] | None = None) -> Report:
    """Mutate `module` (a file under `src`) and run `tests` (pytest arguments, from `cwd`)
    against each mutant, `jobs` at once; `limit`: a random sample of that many mutants;
    `name`: the module as reported (default: its path); `rerun`: the ids of an earlier run's
    survivors, the only mutants run again (the others were killed then, and stay killed as long
    as the module is unchanged and tests are only added)."""
    functions = tuple(functions) if functions is not None else None
    relative = _relative(module, src)
    found = mutants(module.read_text(), functions)
    if limit is not None and limit < len(found):
        found = sorted(random.Random(seed).sample(found, limit), key=lambda m: int(m.id[1:]))
    report = Report(name or str(module), tuple(tests), functions)
    if rerun is not None:
        again = set(rerun)
        report.outcomes += [Outcome(m, True, 0.0, earlier=True) for m in found
                            if m.id not in again]
        found = [m for m in found if m.id in again]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="racklift-mutate-") as tmp:
        workers = [_Worker(src, Path(tmp) / f"w{n}") for n in range(max(1, jobs))]
        imported = Path(_imported_from(workers[0].copy, relative, cwd))
        if imported.resolve() != (workers[0].copy / relative).resolve():
            raise BaselineFailed(f"the tests would import {imported}, not the mutated copy: "
                                 "is the package installed in a way that wins over PYTHONPATH?")
        code, seconds, out = workers[0].run(relative, None, tests, cwd, None)
        if code != 0:
            raise BaselineFailed(f"the unmutated tests fail (exit status {code}): "
                                 f"{' '.join(tests)}\n{out[-3000:]}")
        report.baseline_seconds = seconds
        limit_s = timeout if timeout is not None else max(30.0, 10 * seconds)
        free = list(workers)
        lock = threading.Lock()
        report_total = len(report.outcomes) + len(found)

        def one(mutant: Mutant) -> Outcome:
            with lock:
                worker = free.pop()
            try:
                code, seconds, _ = worker.run(relative, mutant.source, tests, cwd, limit_s)
            finally:
                with lock:
                    free.append(worker)
            outcome = Outcome(mutant, code != 0, seconds, timed_out=code is None)
            with lock:
                report.outcomes.append(outcome)
                if progress:
                    progress(outcome, len(report.outcomes), report_total)
            return outcome

        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            list(pool.map(one, found))
    report.outcomes.sort(key=lambda o: int(o.mutant.id[1:]))
    report.seconds = time.monotonic() - started
    return report


# --- the command line ------------------------------------------------------------------------


def _modules(values: Sequence[str] | None) -> list[str]:
    if not values:
        return list(DEFAULT)
    return [m.strip() for v in values for m in v.split(",") if m.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="default modules and their tests:\n" + "\n".join(
                                         f"  {m}: {' '.join(t)}" for m, (t, _) in
                                         DEFAULT.items()))
    parser.add_argument("--module", "-m", action="append", metavar="PATH",
                        help="a module to mutate (repeatable, or comma-separated); "
                             "default: every module of the default set")
    parser.add_argument("--tests", "-t", action="append", metavar="PATH",
                        help="the test files to run (repeatable, or comma-separated; pytest "
                             "arguments); default: the module's from the default set")
    parser.add_argument("--function", "-f", action="append", metavar="NAME",
                        help="mutate only inside these top-level functions or classes "
                             "(repeatable, or comma-separated); default: the default set's "
                             "choice for the module (record_verdicts.py: its pure part), else all")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once")
    parser.add_argument("--limit", type=int, help="a random sample of N mutants per module")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed")
    parser.add_argument("--min", type=float, default=90.0,
                        help="the lowest acceptable score per module, in %% (default 90)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds per mutant (default: 10 times the unmutated run, at "
                             "least 30)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    parser.add_argument("--rerun", type=Path, metavar="FILE",
                        help="run again only the survivors an earlier --json FILE lists (the "
                             "module unchanged since, tests only added): after writing tests")
    parser.add_argument("--list", action="store_true",
                        help="only list the mutants, run nothing")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="a line per mutant as it is judged")
    args = parser.parse_args(argv)
    reports: list[Report] = []
    below = []
    for module in _modules(args.module):
        default_tests, default_functions = DEFAULT.get(module, ((), None))
        tests = _modules(args.tests) if args.tests else list(default_tests)
        functions = _modules(args.function) if args.function else default_functions
        path = ROOT / module
        if args.list:
            for m in mutants(path.read_text(), functions):
                print(f"{module}:{m.line} {m.id} {m.description}")
            continue
        if not tests:
            parser.error(f"{module} is not in the default set: name its tests with --tests")

        def progress(outcome: Outcome, done: int, total: int) -> None:
            if args.verbose:
                verdict = ("killed (timeout)" if outcome.timed_out else
                           "killed" if outcome.killed else "SURVIVED")
                print(f"  [{done}/{total}] {outcome.mutant.id} {outcome.mutant.description}: "
                      f"{verdict} ({outcome.seconds:.1f} s)", flush=True)

        print(f"{module}: mutating{' ' + ', '.join(functions) if functions else ''}; "
              f"tests: {' '.join(tests)}", flush=True)
        rerun = None
        if args.rerun:
            earlier = {r["module"]: r for r in json.loads(args.rerun.read_text())}
            if module not in earlier:
                parser.error(f"{args.rerun} has no results for {module}")
            rerun = [s["id"] for s in earlier[module]["survivors"]]
        try:
            report = run(path, tests, src=ROOT / "src", cwd=ROOT, jobs=args.jobs,
                         functions=functions, limit=args.limit, seed=args.seed,
                         timeout=args.timeout, name=module, rerun=rerun,
                         progress=progress)
        except BaselineFailed as error:
            print(f"{module}: {error}", file=sys.stderr)
            return 2
        reports.append(report)
        print(report.line(), flush=True)
        for m in report.survivors:
            print(f"  survived: {module}:{m.line} {m.description}", flush=True)
        if report.score < args.min:
            below.append(module)
    if reports:
        print("\n".join(["", "scores:", *(f"  {r.line()}" for r in reports)]))
        if below:
            print(f"below {args.min:g} %: {', '.join(below)}")
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in reports], indent=2) + "\n")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
