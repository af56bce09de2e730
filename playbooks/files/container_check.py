#!/usr/bin/env python3
"""racklift's container check, run on the host by verify (playbooks/collect.yml): with Docker,
pull a small image through the host's registry mirror and run it with the nvidia runtime.

Prints one JSON document: the steps in order (engine, mirror-configured, runtime, pull,
mirror-served, run), each with its command, exit code, the end of its output, seconds, whether
it passed and why not. It stops at the first step that fails, except that the mirror is still
asked for the image after a failed pull (whether the mirror answers is the likely cause). What
a failure means and what to do is said on the controller (racklift.verify.container_check).

Not read-only: the image stays in the engine's cache; the container is removed.
Standard library only, Python >= 3.6, like collect.py. Usage, or on stdin as python3 - ...:
    container_check.py --mirror URL --image REF [--gpus] [--pull-timeout S] -- CMD [ARG...]
"""

import argparse
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

KEEP = 4000  # characters kept of each output: its end, where an error is
# docker info narrowed to what the check reads: the full document is large and unbounded.
INFO_FORMAT = ('{"server": {{json .ServerVersion}}, "mirrors": {{json .RegistryConfig.Mirrors}},'
               ' "runtimes": {{json .Runtimes}}, "errors": {{json .ServerErrors}}}')
MIRROR = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?/?\Z")
# Docker's registry-mirrors serve Docker Hub only: [docker.io/]name[:tag][@sha256:digest].
COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE = re.compile(r"^(?:(?:docker\.io|index\.docker\.io)/)?(?P<path>{0}(?:/{0})*)"
                   r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}))?"
                   r"(?:@(?P<digest>sha256:[0-9a-f]{{64}}))?\Z"
                   .format(COMPONENT))
MANIFESTS = ", ".join(("application/vnd.docker.distribution.manifest.list.v2+json",
                       "application/vnd.docker.distribution.manifest.v2+json",
                       "application/vnd.oci.image.index.v1+json",
                       "application/vnd.oci.image.manifest.v1+json"))


def mirror_url(text):
    if not MIRROR.match(text):
        raise argparse.ArgumentTypeError("not http(s)://host[:port]: {!r}".format(text))
    return text.rstrip("/")


def hub_image(text):
    match = IMAGE.match(text)
    first = match.group("path").split("/")[0] if match else ""
    if not match or ("/" in match.group("path") and ("." in first or first == "localhost")):
        raise argparse.ArgumentTypeError(
            "not a Docker Hub image (Docker mirrors Docker Hub only): {!r}".format(text))
    return text


def tail(data):
    text = data.decode("utf-8", "replace")
    return text if len(text) <= KEEP else "[...{} characters cut]\n{}".format(
        len(text) - KEEP, text[-KEEP:])


def first_line(*texts):
    """The first line of the first text with one: docker's errors say it there, what
    follows is hints ("Run 'docker run --help'") or follow-on errors."""
    lines = [line.strip() for text in texts for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def judged(name, ok, why):
    """A step decided from an earlier one's output, with no command of its own."""
    return {"step": name, "command": None, "rc": None, "seconds": 0, "stdout": "",
            "stderr": "", "ok": ok, "why": "" if ok else why}


def run(name, command, timeout):
    started = time.monotonic()
    try:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, b"", "timed out after {} s".format(timeout).encode()
    except OSError as exc:  # as a shell says it: 127 not found, 126 not executable
        rc = 127 if isinstance(exc, FileNotFoundError) else 126
        out, err = b"", "{}: {}".format(command[0], os.strerror(exc.errno)).encode()
    step = {"step": name, "command": command, "rc": rc,
            "seconds": round(time.monotonic() - started, 3), "stdout": tail(out),
            "stderr": tail(err), "ok": rc == 0, "why": ""}
    if rc != 0:
        step["why"] = first_line(step["stderr"], step["stdout"]) or "exit {}".format(rc)
    return step


def engine(step):
    """docker info's fields, or None with step marked failed."""
    try:
        info = json.loads(step["stdout"]) if step["ok"] else None
    except ValueError:
        info = None
        step.update(ok=False, why="docker info did not answer JSON")
    if info and info.get("errors"):  # the client answered, the daemon did not
        step.update(ok=False, why="; ".join(info["errors"]))
    return info if step["ok"] else None


def served(mirror, image, timeout):
    """Whether the mirror has the image's manifest: after a pull through it, it must. A pull
    that bypassed the mirror (Docker falls back to Docker Hub when a mirror fails) is caught
    here. Docker's own CA directory for the mirror applies; no proxy, as dockerd's own."""
    match = IMAGE.match(image)
    path = match.group("path")
    url = "{}/v2/{}/manifests/{}".format(mirror, path if "/" in path else "library/" + path,
                                         match.group("digest") or match.group("tag") or "latest")
    ca = os.path.join("/etc/docker/certs.d", mirror.split("://", 1)[1], "ca.crt")
    context = ssl.create_default_context(cafile=ca if os.path.exists(ca) else None)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    request = urllib.request.Request(url, method="HEAD", headers={"Accept": MANIFESTS})
    started = time.monotonic()
    try:
        with opener.open(request, timeout=timeout) as response:
            status, why = response.status, ""
            out = "HTTP {} {}".format(status, response.headers.get("Docker-Content-Digest", ""))
    except urllib.error.HTTPError as exc:
        status, out, why = exc.code, "", "the mirror answered HTTP {} {}".format(exc.code,
                                                                               exc.reason)
    except (urllib.error.URLError, OSError) as exc:
        status, out = None, ""
        why = "the mirror does not answer: {}".format(getattr(exc, "reason", exc))
    return {"step": "mirror-served", "command": ["HEAD", url], "rc": 0 if status == 200 else 1,
            "seconds": round(time.monotonic() - started, 3), "stdout": out.strip(),
            "stderr": why, "ok": status == 200, "why": why}


def steps(args):
    step = run("engine", ["docker", "info", "--format", INFO_FORMAT], 60)
    info = engine(step)
    yield step
    if info is None:
        return
    mirrors = [m.rstrip("/").lower() for m in info.get("mirrors") or []]
    step = judged("mirror-configured", args.mirror.lower() in mirrors,
                  "the engine's registry mirrors are {}, not {}: its pulls go around it".format(
                      ", ".join(mirrors) or "none", args.mirror))
    yield step
    if not step["ok"]:
        return
    runtimes = info.get("runtimes") or {}
    if "nvidia" not in runtimes:
        step = judged("runtime", False, "the engine has no nvidia runtime (its runtimes: "
                      "{})".format(", ".join(sorted(runtimes)) or "none"))
    else:
        step = run("runtime", [runtimes["nvidia"].get("path") or "nvidia-container-runtime",
                               "--version"], 30)
    yield step
    if not step["ok"]:
        return
    pull = run("pull", ["docker", "pull", args.image], args.pull_timeout)
    yield pull
    step = served(args.mirror, args.image, 30)
    if pull["ok"] and not step["ok"]:
        step["why"] = "{} was pulled, but not from the mirror: {}".format(args.image, step["why"])
    yield step
    if not (pull["ok"] and step["ok"]):
        return
    yield run("run", ["docker", "run", "--rm", "--runtime", "nvidia"]
              + (["--gpus", "all"] if args.gpus else []) + [args.image] + args.command,
              args.run_timeout)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=mirror_url, required=True,
                        help="the Docker Hub mirror the engine must use")
    parser.add_argument("--image", type=hub_image, required=True, help="a Docker Hub image")
    parser.add_argument("--gpus", action="store_true", help="docker run --gpus all")
    parser.add_argument("--pull-timeout", type=int, default=300, help="seconds")
    parser.add_argument("--run-timeout", type=int, default=120, help="seconds")
    parser.add_argument("command", nargs="+", help="what to run in the image, after --")
    args = parser.parse_args(argv)
    document = {"hostname": os.uname()[1], "checked_at": time.time(), "mirror": args.mirror,
                "image": args.image, "command": args.command, "gpus": args.gpus,
                "steps": list(steps(args))}
    json.dump(document, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
