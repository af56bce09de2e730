"""The lab's firmware images (LAB ONLY): their format, and how the lab's BMC stand-in
(racklift.lab.vrack.lab_bmc) fetches one for an update task, from inside the rack's network
namespace where the boot server is. A lab image is JSON:

    {"racklift_lab_firmware_image": 1, "component": "BMC" | "BIOS", "version": "2.00",
     "fail": "optional: the task ends in Exception with this message"}

Everything fetched is untrusted: http(s) only (after redirects too), a size cap, a deadline."""

from __future__ import annotations

import json
import os
import re
import time
from typing import NamedTuple
from urllib.parse import urlsplit

import requests

from racklift.lab.vrack.bmc import NETNS_KEY
from racklift.text import printable

MAX_IMAGE = 1 << 20  # bytes of an image
FETCH_TIMEOUT = 10.0  # seconds per connect or read
FETCH_DEADLINE = 30.0  # seconds for the whole download
MAX_REDIRECTS = 3
MAX_MESSAGE = 300  # characters of a task's message
IMAGE_MARK = "racklift_lab_firmware_image"
COMPONENTS = {"BMC": "BMC Firmware", "BIOS": "BIOS"}  # Id -> Name
NETNS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# A version as racklift's pins take one: printable ASCII, no space at either end, at most 64.
VERSION = re.compile(r"[!-~](?:[ -~]{0,62}[!-~])?")


class ImageError(Exception):
    """Why an update task fails: its message is the task's."""


class Image(NamedTuple):
    component: str  # BMC or BIOS
    version: str
    fail: str | None


def cut(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` made printable, at most `limit` characters."""
    text = printable(text)
    return text if len(text) <= limit else text[:limit] + "..."


def fetch_image(uri: str, limit: int = MAX_IMAGE, timeout: float = FETCH_TIMEOUT,
                deadline: float = FETCH_DEADLINE) -> bytes:
    """The bytes at `uri` (http or https, also after redirects), at most `limit` of them."""
    started = time.monotonic()
    with requests.Session() as session:
        session.trust_env = False  # no proxy, no .netrc: the lab's network as it is
        session.max_redirects = MAX_REDIRECTS
        try:
            with session.get(uri, stream=True, timeout=timeout,
                             headers={"Accept-Encoding": "identity"}) as response:
                if urlsplit(response.url).scheme not in ("http", "https"):
                    raise ImageError(f"ImageURI {cut(uri, 120)} redirected off http(s)")
                if response.status_code != 200:
                    raise ImageError(f"ImageURI {cut(uri, 120)} answered HTTP "
                                     f"{response.status_code}: no image fetched")
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > limit:
                    raise ImageError(f"image at {cut(uri, 120)} is {int(length)} bytes: "
                                     f"too big, this BMC takes at most {limit}")
                data = bytearray()
                while chunk := response.raw.read(65536, decode_content=False):
                    data += chunk
                    if len(data) > limit:
                        raise ImageError(f"image at {cut(uri, 120)} is over {limit} bytes: "
                                         "too big for this BMC")
                    if time.monotonic() - started > deadline:
                        raise ImageError(f"ImageURI {cut(uri, 120)} took over {deadline:.0f} s"
                                         ": download abandoned")
                return bytes(data)
        except requests.RequestException as exc:
            raise ImageError(f"ImageURI {cut(uri, 120)} unreachable: {type(exc).__name__}: "
                             f"{cut(str(exc), 200)}") from None


def lab_image(component: str, version: str, fail: str | None = None) -> bytes:
    """A lab firmware image (the stand-in's format): `fail` makes its update task fail."""
    return json.dumps({IMAGE_MARK: 1, "component": component, "version": version,
                       **({"fail": fail} if fail is not None else {})}).encode()


def parse_image(data: bytes) -> Image:
    """A lab firmware image, checked; ImageError says what is wrong with anything else."""
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        payload = None
    mark = payload.get(IMAGE_MARK) if isinstance(payload, dict) else None
    if not isinstance(payload, dict) or mark != 1 or isinstance(mark, bool):
        raise ImageError(f"not a racklift lab firmware image (a JSON object with "
                         f"\"{IMAGE_MARK}\": 1): {len(data)} bytes refused")
    component, version, fail = (payload.get(k) for k in ("component", "version", "fail"))
    if component not in COMPONENTS:
        raise ImageError(f"lab firmware image names component {cut(repr(component), 80)}: "
                         f"this BMC updates {' or '.join(COMPONENTS)}")
    if not (isinstance(version, str) and VERSION.fullmatch(version)):
        raise ImageError(f"lab firmware image's version {cut(repr(version), 80)} is not 1 to "
                         "64 printable ASCII characters with no space at either end")
    if fail is not None and not isinstance(fail, str):
        raise ImageError(f"lab firmware image's fail is {type(fail).__name__}, not a message")
    return Image(component, version, cut(fail) if fail is not None else None)


def enter_netns(name: str) -> None:
    """The calling thread's sockets from now on in network namespace `name` (setns is per
    thread): a task's fetch reaches the rack's boot server, the app keeps the host's loopback."""
    if not NETNS_NAME.fullmatch(name):
        raise ImageError(f"{NETNS_KEY} {name!r} is not a namespace name")
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)
