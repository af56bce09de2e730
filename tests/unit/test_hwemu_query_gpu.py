"""`nvidia-smi --query-gpu` as the lab emulates it (src/racklift/lab/hwemu/query_gpu.py): the
fields racklift asks for, with and without header and units, and the real message for a field
that does not exist. One of the emulator's test files, one per module of src/racklift/lab/hwemu,
named test_hwemu_<module>.py."""

from __future__ import annotations

import re

import hwemu_support
import pytest

from racklift.lab import hwemu

profile = hwemu_support.profile


REQUIRED_QUERY_FIELDS = {
    "index": "index", "name": "name", "serial": "serial", "uuid": "uuid",
    "pci.bus_id": "pci.bus_id", "vbios_version": "vbios_version",
    "driver_version": "driver_version", "persistence_mode": "persistence_mode",
    "ecc.mode.current": "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total": "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total": "ecc.errors.uncorrected.aggregate.total",
    "pcie.link.gen.current": "pcie.link.gen.current", "pcie.link.gen.max": "pcie.link.gen.max",
    "pcie.link.width.current": "pcie.link.width.current",
    "pcie.link.width.max": "pcie.link.width.max", "memory.total": "memory.total [MiB]",
    "temperature.gpu": "temperature.gpu", "power.draw": "power.draw [W]",
    "clocks.sm": "clocks.current.sm [MHz]", "retired_pages.pending": "retired_pages.pending",
    "remapped_rows.pending": "remapped_rows.pending",
    "remapped_rows.failure": "remapped_rows.failure",
}


def test_query_gpu_header_and_values(profile: hwemu.Profile) -> None:
    fields = list(REQUIRED_QUERY_FIELDS)
    out = hwemu.nvidia_smi_query(profile, fields).splitlines()
    assert out[0] == ", ".join(REQUIRED_QUERY_FIELDS.values())
    assert len(out) == 9
    row = dict(zip(fields, out[1].split(", "), strict=True))
    g = profile.gpus[0]
    assert row["index"] == "0" and row["name"] == "NVIDIA H100 80GB HBM3"
    assert row["serial"] == g.serial and row["uuid"] == g.uuid
    assert row["pci.bus_id"] == "00000000:18:00.0"
    assert row["driver_version"] == "550.127.08" and row["vbios_version"] == "96.00.89.00.01"
    assert row["persistence_mode"] == "Enabled" and row["ecc.mode.current"] == "Enabled"
    assert row["ecc.errors.uncorrected.volatile.total"] == "0"
    assert row["pcie.link.gen.current"] == "5" and row["pcie.link.width.max"] == "16"
    assert row["memory.total"] == "81559 MiB"
    assert re.fullmatch(r"\d+", row["temperature.gpu"])
    assert re.fullmatch(r"\d+\.\d\d W", row["power.draw"])
    assert row["clocks.sm"] == "345 MHz"
    assert row["retired_pages.pending"] == "[N/A]"
    assert row["remapped_rows.pending"] == row["remapped_rows.failure"] == "No"


def test_query_gpu_noheader_nounits(profile: hwemu.Profile) -> None:
    out = hwemu.nvidia_smi_query(profile, ["memory.total", "power.draw", "clocks.sm",
                                           "retired_pages.pending"], noheader=True, nounits=True)
    lines = out.splitlines()
    assert len(lines) == 8
    total, power, sm, retired = lines[0].split(", ")
    assert total == "81559" and re.fullmatch(r"\d+\.\d\d", power) and sm == "345"
    assert retired == "[N/A]"
    with_units_header = hwemu.nvidia_smi_query(profile, ["memory.total"], nounits=True)
    assert with_units_header.splitlines()[:2] == ["memory.total [MiB]", "81559"]


def test_query_gpu_unknown_field(profile: hwemu.Profile) -> None:
    with pytest.raises(hwemu.InvalidQueryField) as err:
        hwemu.nvidia_smi_query(profile, ["index", "cuda_version"])
    assert str(err.value) == 'Field "cuda_version" is not a valid field to query.'
