"""GPUs as a NetBox records them either way: the device type's inventory item templates of role
gpu, or the device's modules whose module type has NetBox's GPU profile (a GPU tray in module
bays), in the shape NetBox 4.7's API returns them. The expected model and the inventory agree on
what a device lacks."""

from racklift.netbox.expected_hosts import build_hosts
from racklift.netbox.inventory_hosts import RawInventory, build_inventory_hosts
from racklift.netbox.raw_records import RawModel

TYPE = {"id": 1, "model": "HGX-tray", "slug": "hgx-tray", "manufacturer": {"name": "x"}}
GPU_PROBLEM = "device_type.inventory_item_templates"


def _device(id_: int, name: str) -> dict:
    return {"id": id_, "name": name, "status": {"value": "planned"}, "site": {"slug": "a"},
            "rack": None, "role": {"slug": "gpu-server"}, "platform": None,
            "device_type": {"id": 1}, "serial": f"S{id_}", "asset_tag": None,
            "primary_ip4": None, "primary_ip6": None, "oob_ip": None, "config_context": {},
            "tags": []}


def _module(id_: int, device: int, bay: str, serial: str | None) -> dict:
    """As /api/dcim/modules/?profile=GPU returns it (fields racklift asks for)."""
    return {"id": id_, "device": {"id": device, "name": f"gpu-{device:03d}"},
            "module_bay": {"id": id_, "name": bay, "display": bay},
            "module_type": {"id": 1, "model": "NVIDIA H100 80GB HBM3", "display": "H100",
                            "profile": {"id": 3, "name": "GPU"},
                            "manufacturer": {"id": 2, "name": "NVIDIA", "slug": "nvidia"}},
            "serial": serial}


DEVICES = [_device(1, "gpu-001"), _device(2, "gpu-002")]
# gpu-001 holds eight GPU modules (bays GPU0..GPU10 to show the order is natural, not text);
# gpu-002, of the same type, none.
MODULES = [_module(10 + n, 1, f"GPU{n}", f"16549{n:08d}" if n != 3 else None)
           for n in (10, 2, 0, 1, 3, 4, 5, 6)]


def test_gpu_modules_are_the_expected_gpus_in_bay_order():
    host = next(h for h in build_hosts(RawModel(DEVICES, [TYPE], [], [], [], [], [],
                                                modules=MODULES)) if h.name == "gpu-001")
    assert [g.name for g in host.gpus] == ["GPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5",
                                           "GPU6", "GPU10"]
    first = host.gpus[0]
    assert (first.manufacturer, first.part_id, first.serial) == (
        "NVIDIA", "NVIDIA H100 80GB HBM3", "1654900000000")
    assert host.gpus[3].serial is None  # a module without a serial: recorded later, not failed


def test_the_model_and_the_inventory_agree_on_a_device_without_gpus():
    # (The inventory reads fewer interfaces, so it knows less of them: GPUs are compared.)
    model = {h.name: GPU_PROBLEM in {p.field for p in h.problems} for h in build_hosts(
        RawModel(DEVICES, [TYPE], [], [], [], [], [], modules=MODULES))}
    inventory = {h.name: GPU_PROBLEM in {p.field for p in h.problems}
                 for h in build_inventory_hosts(
                     RawInventory(DEVICES, [TYPE], [], [], [], [], modules=MODULES))}
    assert model == inventory == {"gpu-001": False, "gpu-002": True}
