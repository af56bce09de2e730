"""apt_vendor's key check (roles/apt_vendor/files/openpgp_fingerprints.py) against gpg itself:
the same primary fingerprints for armoured and binary exports, subkeys left out, and a file
that is no key refused."""

import subprocess

import pytest

from helpers import REPO, load_script

SCRIPT = REPO / "roles/apt_vendor/files/openpgp_fingerprints.py"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two keys made by gpg (each with an encryption subkey), exported as apt would fetch them,
    and the primary fingerprints gpg reports."""
    home = tmp_path_factory.mktemp("gnupg")
    gpg = ["gpg", "--homedir", str(home), "--batch", "--passphrase", ""]
    for uid in ("racklift test one <one@racklift.test>", "racklift test two <two@racklift.test>"):
        subprocess.run([*gpg, "--quick-gen-key", uid, "default", "default", "never"],
                       check=True, capture_output=True)
    listing = subprocess.run([*gpg, "--with-colons", "--list-keys"], check=True,
                             capture_output=True, text=True).stdout.splitlines()
    # A 'fpr' record follows its key: primary keys are 'pub', subkeys 'sub'.
    primaries = [listing[i + 1].split(":")[9] for i, line in enumerate(listing)
                 if line.startswith("pub:")]
    subkeys = [listing[i + 1].split(":")[9] for i, line in enumerate(listing)
               if line.startswith("sub:")]
    out = {}
    for name, armour in (("one.asc", ["--armor"]), ("one.gpg", [])):
        out[name] = subprocess.run([*gpg, *armour, "--export", primaries[0]], check=True,
                                   capture_output=True).stdout
    out["both.asc"] = subprocess.run([*gpg, "--armor", "--export"], check=True,
                                     capture_output=True).stdout
    return out, primaries, subkeys


def test_fingerprints_are_gpgs_for_armoured_and_binary_keys(keys):
    files, primaries, subkeys = keys
    script = load_script(SCRIPT, "openpgp_fingerprints")
    assert len(primaries) == 2 and len(subkeys) == 2
    assert script.primary_fingerprints(files["one.asc"]) == [primaries[0]]
    assert script.primary_fingerprints(files["one.gpg"]) == [primaries[0]]
    # Two keys in one file are two fingerprints: apt_vendor takes only exactly the pinned one.
    assert sorted(script.primary_fingerprints(files["both.asc"])) == sorted(primaries)


@pytest.mark.parametrize("data", [
    b"", b"<html>404 Not Found</html>", b"\x99\x00\x05abc",
    b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n"])
def test_a_file_that_is_no_key_is_refused(tmp_path, data):
    path = tmp_path / "key"
    path.write_bytes(data)
    result = subprocess.run(["python3", str(SCRIPT), str(path)], capture_output=True, text=True)
    assert result.returncode == 1 and result.stdout == ""
    assert str(path) in result.stderr
