"""The local registry mirror: pure functions behind the registry_mirror role and its checks."""
