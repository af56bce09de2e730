from racklift.netbox.bootstrap import REQUIREMENTS, bootstrap


def test_bootstrap_creates_everything_once(empty_netbox):
    first = bootstrap(empty_netbox)
    assert all(r.created for r in first)
    assert len(first) == len(REQUIREMENTS)
    second = bootstrap(empty_netbox)
    assert not any(r.created for r in second)
    # racklift's one tag; the lab's tags are the lab's to create (a production NetBox has none).
    assert [t["slug"] for t in empty_netbox.get_all("extras/tags")] == ["racklift"]
    fields = {f["name"]: f for f in empty_netbox.get_all("extras/custom-fields")}
    assert fields["racklift_image"]["object_types"] == ["dcim.device"]
    assert fields["racklift_verified"]["type"]["value"] == "datetime"


def test_bootstrap_never_overwrites_what_operators_made(empty_netbox):
    empty_netbox.create("dcim/device-roles", [
        {"name": "GPU nodes", "slug": "gpu-server", "color": "ff0000",
         "description": "ours"}])
    results = {r.key: r.created for r in bootstrap(empty_netbox)}
    assert results["gpu-server"] is False
    role = empty_netbox.get_all("dcim/device-roles", {"slug": "gpu-server"})[0]
    assert (role["name"], role["color"], role["description"]) == ("GPU nodes", "ff0000", "ours")
