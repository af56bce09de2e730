"""The lab's container images, built on racklift's Debian base (racklift.podman): the host
image (systemd, sshd, python3, sudo) that Molecule and the lab's services run, and the node
image that the lab rack's hosts run (the node roles' Debian packages preinstalled)."""

from __future__ import annotations

from pathlib import Path

from racklift.imaging.diskimage import install_packages, node_role_packages
from racklift.podman import base_image, derived_image, recipe

HERE = Path(__file__).resolve().parent
CONTAINERFILE = HERE / "containerfiles" / "Containerfile"
HOST_REPO = "localhost/racklift-lab-host"
NODE_REPO = "localhost/racklift-lab-node"


def host_image() -> str:
    """The lab host image: systemd, sshd, python3, sudo on the base image."""
    return derived_image(HOST_REPO, base_image(), CONTAINERFILE)


# The node roles the lab's container hosts run (the lab's inventory source, racklift.lab.sources:
# inventory/group_vars/tag_racklift_lab_host.yml here).
LAB_HOST_ROLES = ("base_os", "nvidia_driver", "ofed")


def node_containerfile() -> str:
    """A lab rack host with the Debian packages its node roles install already on it, as
    racklift's disk image and a site's golden image have them: the configure stage then checks,
    pins and configures instead of downloading the same packages into every container. The
    roles still install them themselves (a no-op here); their Molecule scenarios start from the
    plain lab image. The package lists are kept, so a host does not fetch them before its first
    apt operation. The lab's leaf switches (racklift.lab.leaf) run this image's lldpd."""
    return f"""\
ARG BASE
FROM ${{BASE}}
{install_packages(node_role_packages(LAB_HOST_ROLES))}
"""


def node_image() -> str:
    """The lab rack's hosts: the host image with the node roles' Debian packages on it."""
    return derived_image(NODE_REPO, host_image(), recipe(node_containerfile()))
