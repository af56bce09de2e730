"""The simulated fleet (lab only): hosts that cost the controller's machine almost nothing of
their own and answer racklift on the wire, each from its own address, so one controller can be
measured against thousands of them (benchmarks/fleet.py, docs/scale.md).

- `plan`: the fleet's sites, racks and hosts, as the lab's seed models them;
- `document`: what racklift's collector would print on a simulated host;
- `server`: one process answering SSH for every simulated host;
- `network`: the namespace that holds the fleet's addresses.
"""
