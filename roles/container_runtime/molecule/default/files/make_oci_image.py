#!/usr/bin/env python3
"""An OCI image layout with one layer, busybox-static's binary, made without any registry.

Usage: make_oci_image.py BUSYBOX OUT_DIR TAG MESSAGE
The image's default command prints MESSAGE with busybox's echo.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

busybox, out, tag, message = sys.argv[1:5]


def blob(data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(out, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
    for name in ("bin", "tmp"):
        info = tarfile.TarInfo(name)
        info.type, info.mode = tarfile.DIRTYPE, 0o755 if name == "bin" else 0o1777
        tar.addfile(info)
    info = tarfile.TarInfo("bin/busybox")
    with open(busybox, "rb") as f:
        data = f.read()
    info.size, info.mode = len(data), 0o755
    tar.addfile(info, io.BytesIO(data))
    for applet in ("sh", "echo", "cat", "uname"):
        link = tarfile.TarInfo(f"bin/{applet}")
        link.type, link.linkname = tarfile.SYMTYPE, "busybox"
        tar.addfile(link)
layer_tar = raw.getvalue()
layer = blob(gzip.compress(layer_tar, mtime=0))
config = blob(json.dumps({
    "architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/echo", message]},
    "rootfs": {"type": "layers",
               "diff_ids": [f"sha256:{hashlib.sha256(layer_tar).hexdigest()}"]},
}, sort_keys=True).encode())
manifest = blob(json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}],
}, sort_keys=True).encode())
with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest,
        "annotations": {"org.opencontainers.image.ref.name": tag}}]}, f)
