"""A host's lifecycle in NetBox: its status, the stage it last completed, its lock, its journal
and racklift's custom fields on it. The stage names (`stages`), the lock per device (`lock`),
what the `racklift_result` field holds (`result`) and the one writer of all of it (`state`).

Below both the gate (racklift.verify) and the pipeline (racklift.pipeline), which record what
they find and do through it; it imports neither (tests/unit/test_lab_boundary.py checks)."""
