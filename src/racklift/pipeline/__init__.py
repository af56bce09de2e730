"""The pipeline: provision, reimage and verify runs across racks of hosts. It runs the gate
(racklift.verify) and records each host's stages through racklift.lifecycle, below both."""
