"""lspci (src/racklift/facts/parsers/lspci.py): real plain and `-vvv` captures of H100 servers, the
`-D -nn` form with a downgraded link, the NVIDIA GPUs picked out of the bus, and output that is
not lspci's. One of the parsers' test files, one per module of src/racklift/facts/parsers (and
facts/xid.py), named test_parse_<module>.py. Inline samples that are not captures are marked
"synthetic"."""

from __future__ import annotations

import pytest
from parse_support import LSPCI_PLAIN, LSPCI_VVV, real

from racklift.facts.parsers import ParseError, nvidia_gpus_on_pci, parse_lspci

# --------------------------------------------------------------------------- lspci


def test_lspci_real_plain_supermicro_two_h100l_clu6() -> None:
    """Plain ``lspci`` of a Supermicro AMD Genoa server with 2x H100L (clu6/supermicro)."""
    devices = parse_lspci(real(LSPCI_PLAIN))
    assert len(devices) == 149
    gpus = nvidia_gpus_on_pci(devices)
    assert [g.address for g in gpus] == ["0000:c1:00.0", "0000:e1:00.0"]
    assert gpus[0].description == "NVIDIA Corporation GH100 [H100L 94GB]"
    assert (gpus[0].class_name, gpus[0].vendor_id, gpus[0].revision) == (
        "3D controller", "", "a1")
    aspeed = next(d for d in devices if d.address == "0000:62:00.0")
    assert aspeed.class_name == "VGA compatible controller" and aspeed not in gpus
    peripheral = next(d for d in devices if d.address == "0000:00:00.3")
    assert (peripheral.class_name, peripheral.class_id) == ("Generic system peripheral", "0807")


def test_lspci_real_vvv_dell_h100_cx7_leptonai_gpud() -> None:
    """``lspci -vvv`` of a Dell H100 server: a root port at a downgraded 5 of 8 GT/s, an
    H100 and a ConnectX-7 at Gen5 x16 (leptonai/gpud pkg/pci/testdata/lspci-vvv)."""
    port, gpu, cx7 = parse_lspci(real(LSPCI_VVV))
    assert (port.address, port.link_speed_gts, port.link_speed_max_gts) == (
        "0000:00:0c.0", 5.0, 8.0)
    assert (port.link_width, port.link_width_max) == (1, 1)
    assert gpu.address == "0000:4c:00.0"
    assert gpu.description == "NVIDIA Corporation Device 2330"
    assert (gpu.link_speed_gts, gpu.link_width, gpu.link_speed_max_gts, gpu.link_width_max) == (
        32.0, 16, 32.0, 16)
    assert gpu.driver == "nvidia"
    assert (cx7.class_name, cx7.driver) == ("Ethernet controller", "mlx5_core")
    assert nvidia_gpus_on_pci([port, gpu, cx7]) == [gpu]


# Synthetic, in the -D -nn layout lspci prints (an H100 SXM5's line as lspci -nn names it):
# 2 GPUs, an NVSwitch, a GPU's audio function and a ConnectX-7.
_H100_NN = "3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)"
LSPCI_DNN = "\n".join([
    f"0000:18:00.0 {_H100_NN}",
    "0000:1a:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family "
    "[ConnectX-7] [15b3:1021]",
    f"0000:2a:00.0 {_H100_NN}",
    "\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported",
    "\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)",
    "0000:05:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)",
    "0000:65:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:22ba] (rev a1)",
]) + "\n"


def test_lspci_d_nn_and_downgraded_link() -> None:
    devices = {d.address: d for d in parse_lspci(LSPCI_DNN)}
    gpu = devices["0000:18:00.0"]
    assert (gpu.class_name, gpu.class_id, gpu.vendor_id, gpu.device_id) == (
        "3D controller", "0302", "10de", "2330")
    assert gpu.description == "NVIDIA Corporation GH100 [H100 SXM5 80GB]"
    assert gpu.link_width is None  # no -vv block for this one
    degraded = devices["0000:2a:00.0"]
    assert (degraded.link_speed_gts, degraded.link_width) == (16.0, 8)
    assert (degraded.link_speed_max_gts, degraded.link_width_max) == (32.0, 16)
    assert devices["0000:1a:00.0"].device_id == "1021"
    assert [g.address for g in nvidia_gpus_on_pci(devices.values())] == [
        "0000:18:00.0", "0000:2a:00.0"]


def test_lspci_garbage_and_empty() -> None:
    assert parse_lspci("") == []
    with pytest.raises(ParseError) as err:
        parse_lspci("bash: lspci: command not found\n")
    assert err.value.kind == "lspci"
