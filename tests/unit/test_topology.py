"""nvidia-smi topo -m and nvlink -s: the parsers on real captures of several generations
(tests/fixtures/real/SOURCES.md), on hostile input, and the gate's checks against the device
type's expectations (a config context, so a new SKU is data)."""

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts.bundle import Output
from racklift.facts.host import from_bundle
from racklift.facts.parsers import ParseError, parse_nvidia_smi_nvlink, parse_nvidia_smi_topo
from racklift.lab import hwemu
from racklift.verify import compare
from racklift.verify.verdict import judge

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _real(name: str) -> str:
    return (REAL / name).read_text()


def test_hgx_h100_tab_matrix_cut_after_its_nic_rows():
    topo = parse_nvidia_smi_topo(_real(
        "nvidia-smi-topo-m_hgx-h100-nv18_550.54.15_tab_cut-after-nic2.txt"))
    assert topo.gpus == tuple(f"GPU{n}" for n in range(8))
    assert topo.nics == tuple(f"NIC{n}" for n in range(10))
    assert {topo.link(a, b) for a in topo.gpus for b in topo.gpus if a != b} == {"NV18"}
    # Each GPU's own NIC: NIC3 and NIC4 are nobody's (the host's Ethernet cards).
    own = {g: [n for n in topo.nics if topo.link(g, n) == "PIX"] for g in topo.gpus}
    assert own == {"GPU0": ["NIC0"], "GPU1": ["NIC1"], "GPU2": ["NIC2"], "GPU3": ["NIC5"],
                   "GPU4": ["NIC6"], "GPU5": ["NIC7"], "GPU6": ["NIC8"], "GPU7": ["NIC9"]}
    assert topo.cpu_affinity["GPU4"] == "56-111,168-223" and topo.numa_affinity["GPU4"] == "1"
    # Rows the capture lacks are None; a link is read from either end.
    assert topo.links[topo.devices.index("NIC9")] is None
    assert topo.link("NIC9", "GPU7") == "PIX"
    assert topo.nic_names == {}


def test_h100_nv6_space_matrix_with_legend():
    topo = parse_nvidia_smi_topo(_real("nvidia-smi-topo-m_4x-h100-nv6_space_legend-cut.txt"))
    assert topo.link("GPU0", "GPU3") == "NV6" and topo.link("NIC3", "GPU3") == "PIX"
    assert topo.numa_affinity == {"GPU0": "3", "GPU1": "1", "GPU2": "7", "GPU3": "5"}
    assert topo.cpu_affinity["GPU0"] == "6,14,22,30"


def test_pcie_rtx_4090_matrix_has_no_nvlink():
    topo = parse_nvidia_smi_topo(_real("nvidia-smi-topo-m_8x-rtx-4090-pcie_tab.txt"))
    assert {topo.link(a, b) for a in topo.gpus for b in topo.gpus if a != b} == {"SYS"}
    assert [topo.link(g, "NIC0") for g in topo.gpus].count("PHB") == 1


def test_nvlink_status_of_three_generations():
    (v100,) = parse_nvidia_smi_nvlink(_real("nvidia-smi-nvlink-s_v100-sxm2-32gb_2-inactive.txt"))
    assert (v100.gpu, v100.name, v100.inactive) == (3, "Tesla V100-SXM2-32GB", (3, 5))
    assert v100.links[0] == 25.781
    a100 = parse_nvidia_smi_nvlink(_real("nvidia-smi-nvlink-s_a100-sxm4-80gb_2-gpus.txt"))
    assert [(g.gpu, len(g.links), g.inactive) for g in a100] == [(0, 12, ()), (1, 12, ())]
    assert set(a100[0].links) == {25.0}
    (b200,) = parse_nvidia_smi_nvlink(_real("nvidia-smi-nvlink-s_b200_all-links-inactive.txt"))
    assert (b200.gpu, b200.name, b200.links, b200.all_inactive) == (2, "NVIDIA B200", (), True)
    assert parse_nvidia_smi_nvlink("") == ()  # no NVLink on this system: nothing printed


@pytest.mark.parametrize("text", [
    "",
    "No devices were found\n",
    "\tGPU0\tGPU1\n",  # a header without rows
    "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU7\tNV18\t X \n",  # a row the header does not name
    "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU0\tNV18\t X \n",  # a row twice
    "\tGPU0\tGPU1\nGPU0\t X \n",  # too few links
    "\tGPU0\tGPU1\nGPU0\t X \t$(reboot)\n",  # no connection nvidia-smi prints
    "\tGPU0\tGPU1\nGPU0\tNV18\tNV18\n",  # not Self on its own diagonal
    "\tGPU0\tGPU0\n",  # a label twice
    "\tGPU0\t../../x\n",
    "\t" + "\t".join(f"GPU{n}" for n in range(200)) + "\n",
])
def test_topo_refuses_what_is_no_matrix(text):
    with pytest.raises(ParseError):
        parse_nvidia_smi_topo(text)


@pytest.mark.parametrize("text", [
    "GPU 0: H100\n\t Link 1: 26.562 GB/s\n",  # out of order
    "GPU 0: H100\n\t Link 0: 26.562 GB/s\nGPU 0: H100\n",  # a GPU twice
    "\t Link 0: 26.562 GB/s\n",  # a link before any GPU
    "GPU 0: H100\n\t Link 0: 9" * 3 + "99999999999 GB/s\n",
    "GPU 0: H100\nrm -rf /\n",
    "GPU 0: H100\n" + "".join(f"\t Link {n}: 1 GB/s\n" for n in range(65)),
])
def test_nvlink_refuses_what_nvidia_smi_never_prints(text):
    with pytest.raises(ParseError):
        parse_nvidia_smi_nvlink(text)


def _verdict(profile, expected=None, **outputs):
    bundle = emulated.bundle(profile)
    bundle = type(bundle)(bundle.host, {**bundle.outputs, **outputs}, bundle.sysfs)
    return judge(expected or emulated.expected_host(), from_bundle(bundle))


def _fields(verdict):
    return {m.field: m for m in verdict.mismatches}


def test_the_lab_board_meets_its_device_type():
    assert _verdict(emulated.healthy_profile()).mismatches == ()


def test_a_down_nvlink_fails_the_gpu_and_its_pairs():
    found = _fields(_verdict(emulated.with_fault("nvlink-down")))
    assert set(found) == {"nvlink[3].links", "topology.gpu_link"}
    assert found["nvlink[3].links"].observed == "17 active (inactive: 7)"
    assert found["topology.gpu_link"].observed.startswith("GPU0-GPU3 NV17, GPU1-GPU3 NV17")
    assert found["topology.gpu_link"].severity == compare.CRITICAL


def test_a_gpu_whose_hca_sits_on_the_other_socket():
    found = _fields(_verdict(emulated.with_fault("numa-misplaced")))
    assert set(found) == {"topology.GPU6.nic"}
    assert (found["topology.GPU6.nic"].expected, found["topology.GPU6.nic"].observed) == (
        "PXB or nearer", "NODE (mlx5_4)")


def test_slow_links_and_all_links_down_are_named():
    profile = emulated.healthy_profile()
    slow = hwemu.nvidia_smi_nvlink(profile).replace("Link 5: 26.562", "Link 5: 13.281", 1)
    found = _fields(_verdict(profile, **{"nvidia-smi-nvlink.txt": Output(slow)}))
    assert [(f, m.observed) for f, m in found.items()] == [("nvlink[0].speed", "5 at 13.281")]
    down = _real("nvidia-smi-nvlink-s_b200_all-links-inactive.txt")
    found = _fields(_verdict(profile, **{"nvidia-smi-nvlink.txt": Output(down)}))
    assert found["nvlink[2].links"].observed == "0 active (inactive: all)"
    # An HGX board whose GPUs print no NVLink at all (nvlink -s says nothing).
    found = _fields(_verdict(profile, **{"nvidia-smi-nvlink.txt": Output("")}))
    assert {f: m.observed for f, m in found.items()} == {"nvlink": "no GPU reports NVLinks"}


def test_expectations_are_data_and_absent_ones_are_not_checked():
    host = emulated.expected_host()
    pcie_box = replace(host, config={**host.config, "hardware": {"nic_affinity": "PHB"}})
    real = _real("nvidia-smi-topo-m_8x-rtx-4090-pcie_tab.txt")
    v = _verdict(emulated.healthy_profile(), pcie_box,
                 **{"nvidia-smi-topo.txt": Output(real), "nvidia-smi-nvlink.txt": Output("")})
    # GPU6 is PHB to both NICs, the other seven are SYS: their RDMA crosses the sockets.
    assert sorted(f for f in _fields(v) if f.startswith("topology")) == [
        f"topology.GPU{n}.nic" for n in (0, 1, 2, 3, 4, 5, 7)]
    unchecked = replace(host, config={**host.config, "hardware": {}})
    assert not [m for m in _verdict(emulated.with_fault("nvlink-down"), unchecked).mismatches
                if m.field.startswith(("topology", "nvlink"))]


def test_not_collected_is_a_finding_unless_the_gpus_already_say_why():
    gone = Output("", rc=127, stderr="sh: 1: nvidia-smi: not found")
    found = _fields(_verdict(emulated.healthy_profile(), **{"nvidia-smi-topo.txt": gone,
                                                            "nvidia-smi-nvlink.txt": gone}))
    assert {f: m.observed for f, m in found.items()} == {"topology": "not collected",
                                                         "nvlink": "not collected"}
    lost = emulated.with_fault("gpu-lost")
    failing = Output(hwemu.nvidia_smi_topo(lost), rc=15)
    found = _fields(_verdict(lost, **{"nvidia-smi-topo.txt": failing,
                                     "nvidia-smi-nvlink.txt": failing}))
    assert not [f for f in found if f.startswith(("topology", "nvlink"))]
