"""The VMs' BMCs: one sushy-emulator each, TLS from the lab CA, HTTP basic auth, run with the
lab's stand-in for what real BMCs do and sushy-tools lacks (racklift.lab.vrack.lab_bmc: the
firmware inventory, SimpleUpdate with tasks, BIOS settings pending until the next boot)."""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

import requests

from racklift.errors import LabError
from racklift.lab.vrack.commands import _process_pid, _run, _spawn, _terminate
from racklift.lab.vrack.layout import (
    BMC_PORT,
    BMC_USERNAME,
    LAB,
    LIBVIRT_URI,
    VmPlan,
    Vrack,
    ca_bundle,
    ca_dir,
    vm_dir,
    vrack_dir,
)

# The lab's stand-in (lab_bmc) runs sushy-emulator's app; its keys in the same configuration.
LAB_BMC_MODULE = "racklift.lab.vrack.lab_bmc"
STATE_KEY = "RACKLIFT_LAB_BMC_STATE"  # the stand-in's state file (JSON)
FIRMWARE_KEY = "RACKLIFT_LAB_BMC_FIRMWARE"  # the BMC's version when it starts with no state
TASK_SECONDS_KEY = "RACKLIFT_LAB_BMC_TASK_SECONDS"  # an update task runs at least this long
# The network namespace the stand-in fetches images in: the lab's BMCs listen on the host's
# loopback, the boot server they fetch from is on the rack's provisioning bridge (a real site's
# OOB network reaches its boot server).
NETNS_KEY = "RACKLIFT_LAB_BMC_NETNS"


def emulator_config(vm: VmPlan, cert: Path, key: Path, auth_file: Path,
                    state: Path | None = None, bmc_firmware: str | None = None,
                    netns: str | None = None) -> str:
    """sushy-emulator's configuration (a Python file) for the one VM it manages, with the
    stand-in's state file, the BMC's first firmware version and the namespace it fetches
    images in, when given."""
    return (f"SUSHY_EMULATOR_LISTEN_IP = {vm.bmc!r}\n"
            f"SUSHY_EMULATOR_LISTEN_PORT = {BMC_PORT}\n"
            f"SUSHY_EMULATOR_SSL_CERT = {str(cert)!r}\n"
            f"SUSHY_EMULATOR_SSL_KEY = {str(key)!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(auth_file)!r}\n"
            f"SUSHY_EMULATOR_LIBVIRT_URI = {LIBVIRT_URI!r}\n"
            f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{vm.uuid!r}, {vm.name!r}]\n"
            + (f"{STATE_KEY} = {str(state)!r}\n" if state is not None else "")
            + (f"{FIRMWARE_KEY} = {bmc_firmware!r}\n" if bmc_firmware is not None else "")
            + (f"{NETNS_KEY} = {netns!r}\n" if netns is not None else ""))


def emulator_command(config: Path) -> list[str]:
    """The command that runs a VM's BMC: sushy-emulator's app with the lab's stand-in
    (`LAB_BMC_MODULE` in its command line is how the lab finds the process again)."""
    return [sys.executable, "-m", LAB_BMC_MODULE, "--config", str(config)]


# Paths and commands


def _ensure_ca() -> None:
    directory = ca_dir()
    if (directory / "ca.pem").exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(directory / "ca.key"), "-out", str(directory / "ca.pem"),
         "-days", "3650", "-subj", "/CN=racklift lab BMC CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def issue_cert(directory: Path, name: str, addresses: Sequence[str]) -> tuple[Path, Path]:
    """A server certificate from the lab BMC CA for `addresses` (bmc.pem, bmc.key in
    `directory`), made once."""
    _ensure_ca()
    cert, key = directory / "bmc.pem", directory / "bmc.key"
    if cert.exists() and key.exists():
        return cert, key
    directory.mkdir(parents=True, exist_ok=True)
    csr, ext = directory / "bmc.csr", directory / "bmc.ext"
    _run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text(f"subjectAltName={','.join(f'IP:{a}' for a in addresses)}\n"
                   "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n"
                   "subjectKeyIdentifier=hash\n")
    _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_bundle()),
         "-CAkey", str(ca_dir() / "ca.key"), "-CAcreateserial", "-days", "825",
         "-extfile", str(ext), "-out", str(cert))
    csr.unlink()
    ext.unlink()
    return cert, key


def _ensure_cert(rack: Vrack, vm: VmPlan) -> tuple[Path, Path]:
    return issue_cert(vm_dir(rack, vm.name), f"{vm.name}-bmc", [str(vm.bmc)])


def _password_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "bmc-password"


def lab_password(path: Path) -> str:
    """A lab password kept in `path` (made once; mode 0600)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(18))
    return path.read_text().strip()


def bmc_password(rack: Vrack = LAB) -> str:
    """The lab BMCs' password (made once per rack)."""
    return lab_password(_password_file(rack))


def _auth_file(rack: Vrack) -> Path:
    """htpasswd for the emulators (sushy-tools accepts bcrypt entries only)."""
    import bcrypt  # sushy-tools' dependency: present wherever the virtual rack can run

    path = vrack_dir(rack) / "bmc-htpasswd"
    password = bmc_password(rack).encode()
    if path.exists():
        _, digest = path.read_text().strip().split(":", 1)
        if bcrypt.checkpw(password, digest.encode()):
            return path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{BMC_USERNAME}:{bcrypt.hashpw(password, bcrypt.gensalt()).decode()}\n")
    return path


# VMs and their BMC emulators


LAB_BMC = LAB_BMC_MODULE.encode()
SUSHY = b"sushy-emulator"  # a plain sushy-emulator, as racklift started them before lab_bmc


def _emulator_pid(rack: Vrack, name: str) -> int | None:
    pid_file = vm_dir(rack, name) / "bmc.pid"
    return _process_pid(pid_file, LAB_BMC) or _process_pid(pid_file, SUSHY)


def stop_emulator(rack: Vrack, name: str) -> None:
    """Stop the VM's BMC emulator, the stand-in or a plain sushy-emulator left from before."""
    pid_file = vm_dir(rack, name) / "bmc.pid"
    _terminate(f"BMC emulator of {name}", pid_file, LAB_BMC)
    _terminate(f"BMC emulator of {name}", pid_file, SUSHY)


def _bmc_answers(vm: VmPlan) -> bool:
    try:  # the service root answers without credentials, as on real BMCs
        return requests.get(f"https://{vm.bmc}:{BMC_PORT}/redfish/v1", timeout=2,
                            verify=str(ca_bundle())).ok
    except requests.RequestException:
        return False


def _ensure_emulator(rack: Vrack, vm: VmPlan, auth_file: Path) -> bool:
    directory = vm_dir(rack, vm.name)
    if _process_pid(directory / "bmc.pid", LAB_BMC) is not None:
        return False
    stop_emulator(rack, vm.name)  # a plain sushy-emulator holds the address: the stand-in's now
    if importlib.util.find_spec("sushy_tools") is None:
        raise LabError("sushy-tools is not installed: install racklift's dev extra "
                       "(pip install -e '.[dev]'), which brings it")
    cert, key = _ensure_cert(rack, vm)
    config = directory / "bmc.conf"
    config.write_text(emulator_config(vm, cert, key, auth_file, state=directory / "bmc-state.json",
                                      netns=rack.netns))
    _spawn(f"BMC emulator of {vm.name} at https://{vm.bmc}:{BMC_PORT}",
           emulator_command(config), directory / "bmc.pid", lambda: _bmc_answers(vm))
    return True
