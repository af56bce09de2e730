"""verify's container check: the host-side script's inputs and mirror probe, the parser of its
document, and the registry-mirror check on documents the script produced for real
(tests/fixtures/lab, see SOURCES.md there). Variants made by hand say so in their names."""

import http.server
import json
import socket
import threading
from dataclasses import replace

import pytest

import emulated
from helpers import FIXTURES, REPO, load_script
from racklift.facts import bundle as bundles
from racklift.facts.container_check import parse_container_check
from racklift.facts.host import from_bundle
from racklift.facts.parsers import ParseError
from racklift.netbox.expected import ExpectedHost
from racklift.verify.container_check import container_check

SCRIPT = load_script(REPO / "playbooks/files/container_check.py", "container_check")
LAB = FIXTURES / "lab"
MIRROR = "http://127.0.0.1:5000"


def expected(url: str | None) -> ExpectedHost:
    """The emulated lab host, its config context asking for this registry mirror."""
    host = emulated.expected_host()
    return replace(host, config={**host.config, "registry_mirror": {"url": url}})


def facts(text: str | None, rc: int = 0, stderr: str = ""):
    outputs = {} if text is None else {
        bundles.CONTAINER_CHECK: bundles.Output(text, rc=rc, stderr=stderr)}
    return from_bundle(bundles.Bundle("gpu-01", outputs))


def lab(case: str) -> str:
    return (LAB / f"container-check_{case}.json").read_text()


def check(text: str, mirror: str | None = MIRROR) -> tuple[str, str]:
    result = container_check(expected(mirror), facts(text))
    assert result.name == "containers.registry_mirror"
    return result.status, result.detail


# --- the check on the script's real documents -------------------------------------------------

LAB_MIRROR_UNUSED = "http://127.0.0.1:5001"  # the mirror-not-configured case asked for it
REAL = {
    "molecule_pass": ("OK", (
        "rackhello:1.0 pulled through http://127.0.0.1:5000; `/bin/busybox uname -s` ran with "
        "the nvidia runtime: Linux; runtime: nvidia-container-runtime: racklift lab stand-in, "
        "not NVIDIA's runtime (execs runc)")),
    "molecule_mirror-stopped": ("CRITICAL", (
        'docker pull rackhello:1.0 failed (Error response from daemon: Get '
        '"https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on '
        "10.255.255.53:53: no such host); the mirror does not answer: [Errno 111] Connection "
        "refused: check the mirror service at http://127.0.0.1:5000 and its upstream")),
    "molecule_runtime-missing": ("CRITICAL", (
        "the engine has no nvidia runtime (its runtimes: io.containerd.runc.v2, "
        "io.containerd.runtime.v1.linux, runc): run the container_runtime role (NVIDIA "
        "container toolkit)")),
    "molecule_runtime-binary-missing": ("CRITICAL", (
        "the nvidia runtime /usr/bin/nvidia-container-runtime does not run "
        "(/usr/bin/nvidia-container-runtime: No such file or directory): run the "
        "container_runtime role (NVIDIA container toolkit)")),
    "molecule_mirror-not-configured": ("CRITICAL", (
        "the engine's registry mirrors are http://127.0.0.1:5000, not http://127.0.0.1:5001: "
        "its pulls go around it: run the container_runtime role")),
    "molecule_run-fails": ("CRITICAL", (
        "`docker run --runtime nvidia rackhello:1.0 /bin/cat /dev/nvidiactl` failed (cat: can't "
        "open '/dev/nvidiactl': No such file or directory): check the NVIDIA driver and "
        "container toolkit on the host (nvidia-smi, nvidia-container-cli info)")),
    "docker-cli-without-daemon": ("CRITICAL", (
        "Docker does not answer on the host (Cannot connect to the Docker daemon at "
        "unix:///var/run/docker.sock. Is the docker daemon running?): start docker, or run the "
        "container_runtime role")),
}


def test_every_lab_document_is_tested():
    assert {p.name.removeprefix("container-check_").removesuffix(".json")
            for p in LAB.glob("container-check_*.json")} == set(REAL)


@pytest.mark.parametrize("case", sorted(REAL))
def test_each_real_document_gives_its_status_naming_the_cause_and_what_to_do(case):
    mirror = LAB_MIRROR_UNUSED if case == "molecule_mirror-not-configured" else MIRROR
    assert check(lab(case), mirror) == REAL[case]


def test_the_parser_reads_every_step_of_a_passing_check():
    parsed = parse_container_check(lab("molecule_pass"))
    assert (parsed.mirror, parsed.image, parsed.command, parsed.gpus) == (
        MIRROR, "rackhello:1.0", ("/bin/busybox", "uname", "-s"), False)
    assert [s.name for s in parsed.steps] == [
        "engine", "mirror-configured", "runtime", "pull", "mirror-served", "run"]
    assert parsed.passed and parsed.failed is None
    assert parsed.step("mirror-configured").command is None
    assert parsed.step("run").command == (
        "docker", "run", "--rm", "--runtime", "nvidia", "rackhello:1.0", "/bin/busybox",
        "uname", "-s")


def test_facts_keep_the_check_and_a_bundle_on_disk_gives_it_back(tmp_path):
    written = bundles.Bundle("gpu-01", {bundles.CONTAINER_CHECK: bundles.Output(
        lab("molecule_pass"), command="container_check.py")})
    host_dir = bundles.write(written, tmp_path)
    assert from_bundle(bundles.read(host_dir)).container_check == \
        parse_container_check(lab("molecule_pass"))


# --- what is not a failure of the host --------------------------------------------------------

def test_no_desired_mirror_is_ok_whatever_ran():
    assert container_check(expected(None), facts(None)).status == "OK"
    # An empty URL is no URL the model takes: the record is refused, the check cannot judge.
    assert expected("").desired is None
    assert container_check(expected(""), facts(None)).status == "UNKNOWN"
    assert check(lab("molecule_runtime-missing"), None) == ("OK", "no registry mirror configured")


def test_a_bundle_without_the_check_lacks_nothing_and_the_check_is_unknown():
    got = facts(None)
    assert got.container_check is None
    assert not [n for n in got.not_collected if "container" in n]
    assert container_check(expected(MIRROR), got).status == "UNKNOWN"
    assert "did not run" in container_check(expected(MIRROR), got).detail


@pytest.mark.parametrize(("text", "rc", "stderr", "why"), [
    ("", 2, "usage: container_check.py [-h] --mirror MIRROR\ncontainer_check.py: error: "
     "argument --mirror: not http(s)://host[:port]: 'mirror'", "container-check.json: exit 2: "
     "usage: container_check.py [-h] --mirror MIRROR"),
    ("Traceback (most recent call last):", 0, "", "container-check.json: container-check: "
     "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ('{"mirror": "http://m:5000"}', 0, "", "container-check.json: container-check: not "
     "container_check.py's document: no 'image'"),
    ('{"mirror": "m", "image": "i", "command": null, "gpus": false, "steps": []}', 0, "",
     "container-check.json: container-check: not container_check.py's document: command is "
     "not a list"),
])
def test_an_unusable_document_is_unknown_with_why(text, rc, stderr, why):
    got = facts(text, rc, stderr)
    assert got.container_check is None
    assert container_check(expected(MIRROR), got).detail == why
    assert container_check(expected(MIRROR), got).status == "UNKNOWN"


def test_a_check_against_another_mirror_than_netbox_wants_is_unknown():
    assert check(lab("molecule_pass"), "https://mirror.example:5000") == (
        "UNKNOWN", "the host was checked against http://127.0.0.1:5000, NetBox wants "
        "https://mirror.example:5000: re-run verify")
    assert check(lab("molecule_pass"), MIRROR + "/")[0] == "OK"


def test_an_unknown_step_is_not_read():
    document = json.loads(lab("molecule_pass"))
    document["steps"][0]["step"] = "engine-v2"
    with pytest.raises(ParseError, match="unknown step 'engine-v2'"):
        parse_container_check(json.dumps(document))


# --- hand-made variants of real documents: what the lab cannot produce ------------------------

def handmade(case: str, **steps: dict) -> str:
    """A lab document with steps changed (name -> new fields, or None to drop the step)."""
    document = json.loads(lab(case))
    document["steps"] = [step | (steps.get(step["step"]) or {}) for step in document["steps"]
                         if steps.get(step["step"], {}) is not None]
    return json.dumps(document)


def test_handmade_a_pull_that_went_around_the_mirror_is_critical():
    # Docker falls back to Docker Hub when its mirror fails; the lab has no internet to do it.
    why = "rackhello:1.0 was pulled, but not from the mirror: the mirror answered HTTP 404 "
    text = handmade("molecule_pass", run=None, **{"mirror-served": {
        "ok": False, "rc": 1, "stdout": "", "stderr": why, "why": why + "Not Found"}})
    assert check(text) == ("CRITICAL", (
        "rackhello:1.0 was pulled, but not from the mirror: the mirror answered HTTP 404 Not "
        "Found: check the mirror service at http://127.0.0.1:5000 (Docker falls back to the "
        "upstream when its mirror fails)"))


def test_handmade_a_failed_pull_while_the_mirror_has_the_image_points_at_the_engine():
    text = handmade("molecule_pass", run=None, pull={
        "ok": False, "rc": 1, "why": "write /var/lib/docker/tmp/x: no space left on device"})
    assert check(text) == ("CRITICAL", (
        "docker pull rackhello:1.0 failed (write /var/lib/docker/tmp/x: no space left on "
        "device), although the mirror has the image: check the engine on the host (disk "
        "space, docker logs)"))


def test_handmade_a_check_that_stopped_without_a_failure_is_unknown():
    text = handmade("molecule_pass", run=None)
    assert check(text) == (
        "UNKNOWN", "the container check stopped after step mirror-served without a failure")


# --- the host-side script: inputs and the mirror probe ----------------------------------------

@pytest.mark.parametrize("url", [
    "http://127.0.0.1:5000", "https://mirror.example.com", "http://[fd00::5]:5000/",
    "https://head-01:5000"])
def test_mirror_urls_it_takes(url):
    assert SCRIPT.mirror_url(url) == url.rstrip("/")


@pytest.mark.parametrize("url", [
    "mirror:5000", "ftp://m", "http://m:5000/v2", "http://m;id", "http://m:5000 --x",
    "http://m:5000\n", ""])
def test_mirror_urls_it_refuses(url):
    with pytest.raises(SCRIPT.argparse.ArgumentTypeError):
        SCRIPT.mirror_url(url)


@pytest.mark.parametrize("image", [
    "rackhello:1.0", "nvidia/cuda:12.4.1-base-ubuntu22.04", "docker.io/library/ubuntu",
    "index.docker.io/nvidia/cuda@sha256:" + "a" * 64, "my-org/my_image__x:v1"])
def test_docker_hub_images_it_takes(image):
    assert SCRIPT.hub_image(image) == image


@pytest.mark.parametrize("image", [
    "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "127.0.0.1:5000/rackhello", "localhost/x",
    "Ubuntu", "ubuntu:1;id", "ubuntu --privileged", "-v/:/host", "ubuntu\n", "ubuntu:é", ""])
def test_images_it_refuses(image):
    # Docker's registry-mirrors serve Docker Hub only: any other registry goes around the mirror.
    with pytest.raises(SCRIPT.argparse.ArgumentTypeError):
        SCRIPT.hub_image(image)


class Registry(http.server.BaseHTTPRequestHandler):
    """A registry with one manifest: library/rackhello:1.0."""

    def do_HEAD(self):
        found = self.path == "/v2/library/rackhello/manifests/1.0"
        self.send_response(200 if found else 404)
        if found:
            self.send_header("Docker-Content-Digest", "sha256:" + "b" * 64)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def registry():
    server = http.server.HTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_mirror_probe_finds_a_manifest_by_docker_hub_name(registry):
    step = SCRIPT.served(registry, "rackhello:1.0", 5)
    assert (step["ok"], step["stdout"], step["why"]) == (True, "HTTP 200 sha256:" + "b" * 64, "")
    assert step["command"] == ["HEAD", f"{registry}/v2/library/rackhello/manifests/1.0"]


def test_the_mirror_probe_says_when_the_mirror_lacks_the_image_or_does_not_answer(registry):
    assert SCRIPT.served(registry, "docker.io/library/rackhello:2.0", 5)["why"] == \
        "the mirror answered HTTP 404 Not Found"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert SCRIPT.served(f"http://127.0.0.1:{port}", "rackhello:1.0", 5)["why"] == \
        "the mirror does not answer: [Errno 111] Connection refused"
