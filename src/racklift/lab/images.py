"""The lab's container images, built on racklift's Debian base (racklift.podman): the host
image (systemd, sshd, python3, sudo) that Molecule and the lab's services run, and the node
image that the lab rack's hosts run (the node roles' Debian packages preinstalled)."""

from __future__ import annotations

from pathlib import Path

from racklift.podman import base_image, derived_image

HERE = Path(__file__).resolve().parent
CONTAINERFILE = HERE / "containerfiles" / "Containerfile"
HOST_REPO = "localhost/racklift-lab-host"
NODE_REPO = "localhost/racklift-lab-node"


def host_image() -> str:
    """The lab host image: systemd, sshd, python3, sudo on the base image."""
    return derived_image(HOST_REPO, base_image(), CONTAINERFILE)


def node_image() -> str:
    """The lab rack's hosts: the host image with the node roles' Debian packages on it."""
    return derived_image(NODE_REPO, host_image(), HERE / "containerfiles" / "Containerfile.node")
