"""invoke entry point for a checkout: racklift's collections plus developer tasks."""

from invoke import task

from racklift.tasks import namespace


@task(help={"k": "only tests matching this expression", "x": "stop at the first failure"})
def test(c, k=None, x=False):
    """Run the test suite (starts its own NetBox on port 18001)."""
    args = [".venv/bin/pytest"]
    if k:
        args += ["-k", repr(k)]
    if x:
        args.append("-x")
    c.run(" ".join(args), pty=False)


@task
def lint(c):
    """ruff over the package, plugins, tests and tasks."""
    c.run(".venv/bin/ruff check src plugins playbooks tests tasks.py benchmarks")


namespace.add_task(test)
namespace.add_task(lint)
ns = namespace
