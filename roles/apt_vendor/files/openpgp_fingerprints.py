#!/usr/bin/env python3
"""The fingerprints of the primary keys in an OpenPGP key file (ASCII-armoured or binary), one
per line, upper-case hex: what `gpg --show-keys` prints, without needing gpg on the host.

apt_vendor runs it on a downloaded signing key before installing it, so a repository URL can
only bring the key its fingerprint was pinned to. Standard library only, Python >= 3.6.
Usage: openpgp_fingerprints.py FILE; exit 1 with a message when FILE holds no public key.
"""

import base64
import hashlib
import re
import sys

PUBLIC_KEY = 6  # packet tag of a primary public key (14, a subkey, is not a primary key)
ARMOUR = re.compile(rb"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(.*?)-----END PGP PUBLIC KEY "
                    rb"BLOCK-----", re.S)


def dearmour(data):
    """The binary packets of an armoured key file (every block in it); binary data as it is."""
    blocks = ARMOUR.findall(data)
    if not blocks:
        return data
    out = b""
    for block in blocks:
        body = block.replace(b"\r", b"")
        if b"\n\n" in body:  # armour headers (Version: ...) end at the first empty line
            body = body.split(b"\n\n", 1)[1]
        # '=' starts the CRC-24 line.
        lines = [line for line in body.split(b"\n") if line and not line.startswith(b"=")]
        out += base64.b64decode(b"".join(lines), validate=True)
    return out


def packets(data):
    """(tag, body) of each packet (RFC 9580 section 4.2: both header formats)."""
    at = 0
    while at < len(data):
        header = data[at]
        if not header & 0x80:
            raise ValueError("not an OpenPGP packet at byte %d" % at)
        if header & 0x40:  # new format
            tag, first = header & 0x3F, data[at + 1]
            if first < 192:
                length, at = first, at + 2
            elif first < 224:
                length, at = ((first - 192) << 8) + data[at + 2] + 192, at + 3
            elif first == 255:
                length, at = int.from_bytes(data[at + 2:at + 6], "big"), at + 6
            else:
                raise ValueError("partial body lengths in a key packet")
        else:  # legacy format
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            if kind == 3:
                raise ValueError("indeterminate length in a key packet")
            size = (1, 2, 4)[kind]
            length, at = int.from_bytes(data[at + 1:at + 1 + size], "big"), at + 1 + size
        if at + length > len(data):
            raise ValueError("a packet runs past the end of the file")
        yield tag, data[at:at + length]
        at += length


def fingerprint(body):
    """v4: SHA-1 over 0x99, a two-byte length and the key; v6: SHA-256 over 0x9B, four."""
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError("key version %d is not supported (4 and 6 are)" % version)


def primary_fingerprints(data):
    return [fingerprint(body) for tag, body in packets(dearmour(data)) if tag == PUBLIC_KEY]


def main(argv):
    with open(argv[1], "rb") as handle:
        data = handle.read(1 << 20)
    try:
        found = primary_fingerprints(data)
    except (ValueError, IndexError) as exc:
        sys.exit("%s: not an OpenPGP key file (%s)" % (argv[1], exc))
    if not found:
        sys.exit("%s: no public key in it" % argv[1])
    print("\n".join(found))


if __name__ == "__main__":
    main(sys.argv)
