"""invoke entry point for a checkout: racklift's collections plus developer tasks."""

from invoke import task

from racklift.tasks import namespace


@task(help={"k": "only tests matching this expression", "x": "stop at the first failure",
            "unit": "the pure tier only (tests/unit: no NetBox, containers or VMs; under a "
                    "minute)",
            "tier": "only these tiers, a marker expression: unit, netbox, containers, vm, "
                    "molecule, slurm, ansible, redfish (e.g. 'netbox and not containers')"})
def test(c, k=None, x=False, unit=False, tier=None):
    """Run the test suite (starts its own NetBox on port 18001), slowest tests listed last.
    The whole suite runs in two lanes side by side (tests/lanes.py): the VM and Molecule tiers
    (with their own NetBox on port 18002), and the rest."""
    if not (unit or tier or k):
        c.run(".venv/bin/python tests/lanes.py" + (" -x" if x else ""), pty=False)
        return
    args = [".venv/bin/pytest", "tests/unit"] if unit else [".venv/bin/pytest", "--durations=30"]
    if tier:
        args += ["-m", repr(tier)]
    if k:
        args += ["-k", repr(k)]
    if x:
        args.append("-x")
    c.run(" ".join(args), pty=False)


@task
def lint(c):
    """ruff over the Python; yamllint and ansible-lint over the roles, playbooks and
    inventories (production's and the lab's)."""
    c.run(".venv/bin/ruff check src plugins netbox-racklift playbooks tests tasks.py benchmarks")
    c.run(".venv/bin/yamllint --strict roles playbooks inventory src/racklift/lab/inventory "
          ".yamllint .ansible-lint")
    # The project's inventory needs a NetBox; the playbooks' syntax check does not.
    c.run(".venv/bin/ansible-lint roles playbooks", env={"ANSIBLE_INVENTORY": "/dev/null"})


@task(iterable=["module"],
      help={"module": "a module to mutate, its path (src/racklift/...; repeatable, or "
                      "comma-separated); "
                      "default: the gate's pure modules (tests/mutate.py's DEFAULT, each with "
                      "its unit test files)",
            "j": "mutants run at once, each in its own copy of src/ (default 1)",
            "limit": "a random sample of N mutants per module, for a quick look",
            "min": "the lowest acceptable score per module, in % (default 90)",
            "json": "also write the scores and survivors to this file"})
def mutate(c, module=None, j=1, limit=None, min=90, json=None):
    """Mutation testing of the gate's pure modules (tests/mutate.py): each module's unit tests
    run against small changes to it; prints 'module: K/N killed (P %)' and every surviving
    change as path:line, and fails when a module scores below --min."""
    args = [".venv/bin/python", "tests/mutate.py", "-j", str(j), "--min", str(min)]
    for m in module or ():
        args += ["--module", m]
    if limit:
        args += ["--limit", str(limit)]
    if json:
        args += ["--json", json]
    c.run(" ".join(args), pty=False)


namespace.add_task(test)
namespace.add_task(lint)
namespace.add_task(mutate)
ns = namespace
