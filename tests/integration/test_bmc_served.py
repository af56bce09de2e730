"""`bmc.inventory` over HTTP(S) against each real Redfish tree (tests/fixtures/real/redfish)
served by sushy-static (sushy-tools' static mockup server): what the command reads through
racklift's Redfish client is what the reader reads from the files, and a firmware pin is judged
on what is served. Seconds: one small server per tree on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from invoke import Context
from invoke.exceptions import Exit

from racklift.bmc.firmware import Pins, compare, components
from racklift.bmc.inventory import read_inventory
from racklift.tasks import bmc as bmc_tasks
from redfish_trees import ALL, DELL, Tree

pytestmark = pytest.mark.redfish

SUSHY_STATIC = Path(sys.executable).parent / "sushy-static"
ENV = {"RACKLIFT_BMC_USERNAME": "racklift", "RACKLIFT_BMC_PASSWORD": "served-Pa55"}
# Per tree: manufacturer, serial, firmware components, and the BMC's version.
EXPECTED = {
    "dell-poweredge-r750_idrac9-6.00.30.00": ("Dell Inc.", "CNIVC0014M0388", 29, "6.00.30.00"),
    "hpe-proliant-dl385-gen10plus-v2_ilo5-2.72": ("HPE", "MXQ302099S", 48, "2.72 Sep 04 2022"),
    "lenovo-thinksystem-sr670-v2_xcc-2.83": ("Lenovo", "J105958B", 43, "42S-2.83"),
    "supermicro-sys-821ge-tnhr_bmc-11.01.01": ("Supermicro", "S889914X3710910", 106,
                                               "11.01.01"),
    "nvidia-dgx-h100_ami-bmc-23.11.20": ("NVIDIA", "1662923610124", 66, "23.11.21"),
    "gigabyte-h262-z63_ami-megarac-12.84.13": ("GIGABYTE", "GJG9NF512A000302", 3, "12.84.13"),
    "openbmc-2.15.0-dev_stock-build-hardware-unstated": (None, None, 1,
                                                         "2.15.0-dev-686-g100c36de90"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(tree: Path, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """sushy-static serving `tree` (its redfish/v1 directory: the DMTF mockup layout sushy-static
    takes, as the trees are kept), over https with `tls` (cert, key); yields its URL."""
    port = _free_port()
    args = [str(SUSHY_STATIC), "-i", "127.0.0.1", "-p", str(port), "-m",
            str(tree / "redfish" / "v1")]
    if tls:
        args += ["-c", str(tls[0]), "-k", str(tls[1])]
    # It prints each request's headers, the basic auth among them: not kept.
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                requests.get(f"{url}/redfish/v1", timeout=1,
                             verify=str(tls[0]) if tls else True)
                break
            except requests.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sushy-static did not start on {url}") from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def credentials(monkeypatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("tree", ALL, ids=lambda p: p.name)
def test_bmc_inventory_json_reads_each_served_tree(tree, credentials, capsys):
    manufacturer, serial, count, bmc_version = EXPECTED[tree.name]
    with _serve(tree) as url:
        bmc_tasks.inventory(Context(), url=url, json=True)
        printed = json.loads(capsys.readouterr().out)
        over_http = bmc_tasks.read_bmc(url)
    assert (printed["manufacturer"], printed["serial"]) == (manufacturer, serial)
    assert len(printed["firmware"]) == count
    assert ENV["RACKLIFT_BMC_PASSWORD"] not in json.dumps(printed)
    # Through racklift's client, what the reader reads from the files; printed whole.
    from_files = read_inventory(Tree(tree))
    assert over_http == from_files
    assert printed == json.loads(json.dumps(bmc_tasks.inventory_json(from_files)))
    # A BMC pin judged on what was served.
    assert compare(Pins(firmware=(("BMC", bmc_version),)), over_http) == []
    (bmc,) = components(over_http, "BMC")
    assert [(f.found, f.wanted) for f in compare(Pins(firmware=(("BMC", "0.0.1"),)),
                                                 over_http)] == [(bmc.version, "0.0.1")]


def test_https_with_the_bmcs_own_ca_and_the_tables(credentials, tmp_path, capsys):
    cert, key = tmp_path / "bmc.pem", tmp_path / "bmc.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    with _serve(DELL, (cert, key)) as url:
        bmc_tasks.inventory(Context(), url=url, ca=str(cert))
        shown = capsys.readouterr().err
        with pytest.raises(Exit) as refused:  # not our CA: the system trust store refuses it
            bmc_tasks.inventory(Context(), url=url)
    for text in ("Dell Inc.", "CNIVC0014M0388", "6.00.30.00", "PerfOptimized",
                 "everything read"):
        assert text in shown, text
    assert "certificate that does not verify" in str(refused.value)
    assert ENV["RACKLIFT_BMC_PASSWORD"] not in shown + str(refused.value)


def test_no_credentials_no_request(monkeypatch):
    monkeypatch.setenv("RACKLIFT_BMC_USERNAME", "racklift")
    monkeypatch.delenv("RACKLIFT_BMC_PASSWORD", raising=False)
    with pytest.raises(Exit, match="export RACKLIFT_BMC_USERNAME and RACKLIFT_BMC_PASSWORD"):
        bmc_tasks.inventory(Context(), url="http://127.0.0.1:9")
