"""What every emulated tool shares: how it ends other than with exit 0 (ToolExit), and reading
its options as getopt_long does."""

from __future__ import annotations


class ToolExit(Exception):
    """The tool exits `code` after printing `stdout` and `stderr`."""

    def __init__(self, code: int, stdout: str = "", stderr: str = "") -> None:
        super().__init__(code)
        self.code, self.stdout, self.stderr = code, stdout, stderr


def read_options(prog: str, args: list[str], valued: dict[str, str],
                 flags: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """`args` read as getopt_long reads them (``-b 8``, ``-b8``, ``--minbytes 8``,
    ``--minbytes=8``; operands anywhere): each option's key in `valued` (or in `flags`, which
    take no value, read as "") to its last value, and the operands. An option outside both ends
    the tool: the lab emulates those only."""
    flags = flags or {}
    found: dict[str, str] = {}
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif name in flags and not eq and not inline:
            found[flags[name]] = ""
        elif name in valued and (eq or inline):
            found[valued[name]] = inline
        elif name in valued and i + 1 < len(args):
            found[valued[name]] = args[i + 1]
            i += 1
        elif name in valued:
            raise ToolExit(1, "", f"{prog}: option {name} needs a value\n")
        else:
            raise ToolExit(1, "", f"{prog}: the lab does not emulate option {arg}\n")
        i += 1
    return found, operands
