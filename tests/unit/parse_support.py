"""What several of the parsers' test files (test_parse_<module>.py) share: the real captures they
read (tests/fixtures/real; each name's source in a comment, the details in SOURCES.md there),
and the lab emulator's profile fixture (uncabled), whose tool output the parsers read under each
fault. A test module takes the fixture with `profile = parse_support.profile`."""

from __future__ import annotations

from pathlib import Path

import pytest

from racklift.lab import hwemu

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


A100_MIG_XML = "nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml"  # influxdata/telegraf
T4_XML = "nvidia-smi-q-x_tesla-t4_515.105.01_v11.xml"  # influxdata/telegraf
P4_XML = "nvidia-smi-q-x_grid-p4-1q-vgpu_513.46_v11-single-double-bit.xml"  # telegraf
BLACKWELL_XML = "nvidia-smi-q-x_rtx-pro-6000-blackwell_590.44.01_v13.xml"  # telegraf
H100_CSV = "nvidia-smi-query-gpu-csv_h100-80gb-hbm3_590.48.01.csv"  # nvidia_gpu_exporter
IBSTAT_IB_ETH = "ibstat_h100-node_cx7-ib_cx6-eth-down.txt"  # leptonai/gpud
IBSTAT_ROCE = "ibstat_h100-node_roce-cx7_polling-and-disabled.txt"  # leptonai/gpud
IBV_DEVINFO = "ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt"  # Heioy/Books
DMIDECODE = "dmidecode_supermicro-sys-7049gp-trt_3.1.txt"  # FDio/csit
LSPCI_PLAIN = "lspci_supermicro-amd-genoa_2x-h100l.txt"  # clu6/supermicro
LSPCI_VVV = "lspci-vvv_dell-h100-cx7_3-devices.txt"  # leptonai/gpud
DMESG_XID79 = "dmesg_xid79_hgx.txt"  # leptonai/gpud
DMESG_XID119 = "dmesg-T_xid119_gsp-timeout_dell-xe9680.txt"  # leptonai/gpud
DMESG_AER_FATAL = "dmesg_aer_fatal_linux-pci-2020-12_bd-cpu18.txt"  # linux-pci list
DMESG_AER_CORRECTED = "dmesg_aer_corrected_linux-pci-2021-01_latitude-5410.txt"  # linux-pci


@pytest.fixture
def profile() -> hwemu.Profile:
    return hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7)
