"""nvidia-smi nvlink -e on real captures (tests/fixtures/real/SOURCES.md): an H100's 18 links
(the author's "[...]" elision taken out), a GB300's link 0 (tab-indented, no UUID); two
readings one after the other; and what is no such output."""

from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError, parse_nvidia_smi_nvlink_errors

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
H100 = "\n".join(line for line in (REAL / "nvidia-smi-nvlink-e_h100-80gb-hbm3_18-links_elided.txt")
                 .read_text().splitlines() if line.strip() != "[...]")
GB300 = (REAL / "nvidia-smi-nvlink-e_gb300_link0-excerpt-no-uuid.txt").read_text()


def test_hopper_and_blackwell_counters():
    (h100,) = parse_nvidia_smi_nvlink_errors(H100)
    assert (h100.gpu, h100.name, h100.reading) == (0, "NVIDIA H100 80GB HBM3", 0)
    counters = h100.by_counter()
    assert sorted({link for link, _ in counters}) == [0, 1, 17]
    assert {name for _, name in counters} == {"Replay Errors", "Recovery Errors", "CRC Errors"}
    assert set(counters.values()) == {0}
    (gb300,) = parse_nvidia_smi_nvlink_errors(GB300)
    assert (gb300.name, gb300.by_counter()) == ("NVIDIA GB300", {
        (0, "Replay Errors"): 0, (0, "Recovery Errors"): 0, (0, "CRC Errors"): 0})


def test_a_gpu_listed_again_begins_the_second_reading():
    rising = GB300.replace("Replay Errors: 0", "Replay Errors: 17")  # hand-made second reading
    first, second = parse_nvidia_smi_nvlink_errors(GB300 + rising)
    assert (first.reading, second.reading) == (0, 1)
    assert second.by_counter()[(0, "Replay Errors")] == 17


def test_nothing_is_no_nvlink():
    assert parse_nvidia_smi_nvlink_errors("") == ()


@pytest.mark.parametrize("text", [
    "GPU 0: NVIDIA GB300\n\t Link 0: Replay Errors: lots\n",
    "GPU 0: NVIDIA GB300\n\t Link 99: Replay Errors: 0\n",
    "\t Link 0: Replay Errors: 0\n",
    GB300 * 5,
])
def test_what_is_no_counter_output_is_refused(text):
    with pytest.raises(ParseError):
        parse_nvidia_smi_nvlink_errors(text)
