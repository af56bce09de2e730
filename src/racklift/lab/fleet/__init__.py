"""The simulated fleet (lab only): hosts that cost the controller's machine almost nothing of
their own and answer racklift on the wire, each from its own address, so one controller can be
measured against thousands of them (benchmarks/fleet.py, docs/scale.md).

- `plan`: the fleet's sites, racks and hosts, as the lab's seed models them;
- `document`: what racklift's collector would print on a simulated host;
- `server`: one process answering SSH and Redfish for every simulated host;
- `machine`: a host's power and boot; `netboot`: its firmware's, iPXE's and the deploy
  ramdisk's side of a network boot, on the wire;
- `network`: the namespaces that hold the fleet's addresses and its sites' provisioning links;
- `boot_servers`: a real boot server per site.
"""
