"""The pipeline: provision, reimage and verify runs across racks of hosts."""
