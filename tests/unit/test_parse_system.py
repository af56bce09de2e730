"""The host's system files (src/racklift/facts/parsers/system.py): /etc/os-release with its quoting
and comments, and a file that is not one. One of the parsers' test files, one per module of
src/racklift/facts/parsers (and facts/xid.py), named test_parse_<module>.py."""

from __future__ import annotations

import pytest

from racklift.facts.parsers import ParseError, parse_os_release

# --------------------------------------------------------------------------- os-release


def test_os_release() -> None:
    """Synthetic, in the layout Debian 12 ships in /etc/os-release."""
    text = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
            'VERSION_ID="12"\nVERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\n'
            "# comment\n\nHOME_URL='https://www.debian.org/'\n"
            'QUOTED="say \\"hi\\""\n')
    release = parse_os_release(text)
    assert release["ID"] == "debian"
    assert release["VERSION_ID"] == "12"
    assert release["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert release["HOME_URL"] == "https://www.debian.org/"
    assert release["QUOTED"] == 'say "hi"'
    with pytest.raises(ParseError) as err:
        parse_os_release("not an os-release file\n")
    assert err.value.kind == "os-release"
