"""The `racklift` console program: the same invoke collections as `invoke` in a checkout."""

from invoke import Program

from racklift import __version__
from racklift.tasks import namespace

program = Program(namespace=namespace, version=__version__, name="racklift", binary="racklift")
