"""``python -m racklift.lab.hwemu SUBCOMMAND``: the emulator's subcommands on the controller."""

import sys

from .cli import main

sys.exit(main(["hwemu", *sys.argv[1:]]))
