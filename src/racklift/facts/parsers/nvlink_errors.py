"""``nvidia-smi nvlink -e`` (``--errorcounters``): each NVLink's error counters per GPU. The
collector reads them twice a few seconds apart, one output after the other, so a GPU listed
again starts the next reading. Formats follow real captures (tests/fixtures/real/SOURCES.md):
Hopper and Blackwell (Replay, Recovery and CRC errors), indented by a tab and a space or by
spaces, with or without a blank line between links and a UUID in the GPU line."""

from __future__ import annotations

import re

from racklift.facts.observed import NvlinkErrors
from racklift.facts.parsers.common import ParseError, shown, text_lines
from racklift.facts.parsers.topology import GPU_HEADER, MAX_DEVICES, MAX_LINKS

KIND = "nvidia-smi nvlink -e"
MAX_READINGS = 4
# "\t Link 3: Replay Errors: 0"; newer drivers print more counters, some not whole numbers.
_COUNTER = re.compile(r"\s+Link ([0-9]{1,3}): ([A-Za-z][A-Za-z0-9 ()_.-]{0,47}?): "
                      r"([0-9]{1,20}(?:\.[0-9]{1,12})?(?:[eE][+-]?[0-9]{1,3})?)")


def parse_nvidia_smi_nvlink_errors(text: str) -> tuple[NvlinkErrors, ...]:
    """One record per GPU and reading, in order. A system without NVLink prints nothing."""
    found: list[NvlinkErrors] = []
    counters: dict[tuple[int, str], float] = {}
    seen: set[int] = set()

    def close() -> None:
        if found:
            last = found[-1]
            found[-1] = NvlinkErrors(last.gpu, last.name, last.reading,
                                     tuple((link, name, value)
                                           for (link, name), value in counters.items()))

    for line in text_lines(text):
        if not line.strip():
            continue
        if gpu := GPU_HEADER.fullmatch(line.rstrip()):
            close()
            counters = {}
            index = int(gpu[1])
            reading = found[-1].reading if found else 0
            if index in seen:  # the second run of the command begins
                reading, seen = reading + 1, set()
            seen.add(index)
            found.append(NvlinkErrors(index, gpu[2], reading, ()))
            if reading >= MAX_READINGS or len(found) > MAX_READINGS * MAX_DEVICES:
                raise ParseError(KIND, f"more than {MAX_READINGS} readings or {MAX_DEVICES} GPUs")
        elif found and (counter := _COUNTER.fullmatch(line.rstrip())):
            link = int(counter[1])
            if link >= MAX_LINKS:
                raise ParseError(KIND, f"GPU {found[-1].gpu}: link {link} out of range")
            value = float(counter[3])
            counters[(link, counter[2])] = int(value) if value.is_integer() else value
        else:
            raise ParseError(KIND, f"a line that is no GPU or link counter: "
                                   f"{shown(line.strip())}")
    close()
    return tuple(found)
