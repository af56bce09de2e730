"""RDMA acceptance in pairs: who tests with whom, and whom a slow pair blames. Pure.

`ib_write_bw` measures a pair, not a host: a slow result is the client's port, the server's, or
the path between. So each port under test is paired on its rail (the switch its NetBox cable
ends at) with a known-good port where the operator allows one (an `active` host), else with
another new host's; a pair below the threshold is tested again, each end with another partner,
and blame lands on the end that stays slow. Where no third port on the rail can tell the two
apart, neither is blamed: both are unproven, which keeps both out of the pool.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PASS, FAIL, UNPROVEN = "pass", "fail", "unproven"


@dataclass(frozen=True, order=True)
class RailPort:
    host: str
    port: str  # the HCA port's device, as ib_write_bw -d takes it (mlx5_0)
    rail: str  # the switch its cable ends at (or the port's name where NetBox has no cable)

    def __str__(self) -> str:
        return f"{self.host} {self.port}"


@dataclass(frozen=True, order=True)
class Pair:
    client: RailPort  # the port under test; the client prints the figure
    server: RailPort

    @property
    def ends(self) -> tuple[RailPort, RailPort]:
        return self.client, self.server

    def other(self, end: RailPort) -> RailPort:
        return self.server if end == self.client else self.client


@dataclass(frozen=True)
class PortVerdict:
    port: RailPort
    outcome: str  # PASS, FAIL or UNPROVEN
    gbps: float | None  # the best figure it reached (PASS), or its best slow one
    why: str


def _by_rail(ports: Iterable[RailPort]) -> dict[str, list[RailPort]]:
    rails: dict[str, list[RailPort]] = defaultdict(list)
    for p in sorted(ports):
        rails[p.rail].append(p)
    return rails


def first_pairs(new: Sequence[RailPort], good: Sequence[RailPort] = ()) -> list[Pair]:
    """One pair per new port: with a known-good port of its rail (spread over them), else with
    the next new port of its rail (two by two; an odd one out with the first). A port alone on
    its rail gets none."""
    good_rails = _by_rail(good)
    pairs = []
    for rail, ports in _by_rail(new).items():
        partners = good_rails.get(rail, [])
        if partners:
            pairs += [Pair(p, partners[i % len(partners)]) for i, p in enumerate(ports)]
        elif len(ports) > 1:
            pairs += [Pair(ports[i], ports[i + 1]) for i in range(0, len(ports) - 1, 2)]
            if len(ports) % 2:
                pairs.append(Pair(ports[-1], ports[0]))
    return pairs


def retest_pairs(results: Mapping[Pair, float | None], threshold: float,
                 new: Sequence[RailPort], good: Sequence[RailPort] = ()) -> list[Pair]:
    """For each slow pair, each new end with another partner on its rail: a known-good port
    first, then a new port that was fast, then any other new port."""
    fast = {end for pair, gbps in results.items() if _fast(gbps, threshold) for end in pair.ends}
    rails_new, rails_good = _by_rail(new), _by_rail(good)
    new_set = set(new)
    pairs: list[Pair] = []
    for pair in sorted(p for p, gbps in results.items() if not _fast(gbps, threshold)):
        for end in pair.ends:
            if end not in new_set:
                continue
            candidates = (rails_good.get(end.rail, [])
                          + sorted(rails_new.get(end.rail, []), key=lambda p: p not in fast))
            others = [p for p in candidates if p not in pair.ends]
            if others:
                retest = Pair(end, others[0])
                if retest not in pairs:
                    pairs.append(retest)
    return pairs


def rounds(pairs: Iterable[Pair]) -> list[list[Pair]]:
    """The pairs in rounds in which no port is in two pairs (one ib_write_bw per device at a
    time), in the order given."""
    out: list[tuple[set[RailPort], list[Pair]]] = []
    for pair in pairs:
        for busy, members in out:
            if not busy & set(pair.ends):
                busy.update(pair.ends)
                members.append(pair)
                break
        else:
            out.append((set(pair.ends), [pair]))
    return [members for _, members in out]


def _fast(gbps: float | None, threshold: float) -> bool:
    return gbps is not None and gbps >= threshold


def _shown(gbps: float | None) -> str:
    return "no result" if gbps is None else f"{gbps:g} Gb/s"


def judge_pairs(results: Mapping[Pair, float | None], threshold: float,
                new: Sequence[RailPort], good: Sequence[RailPort] = ()) -> list[PortVerdict]:
    """Each new port's verdict from every pair it was in (first tests and retests)."""
    seen: dict[RailPort, list[tuple[RailPort, float | None]]] = defaultdict(list)
    for pair, gbps in results.items():
        for end in pair.ends:
            seen[end].append((pair.other(end), gbps))
    good_set = set(good)

    def cleared(partner: RailPort, port: RailPort) -> bool:
        """The partner is fast with someone, or known-good and slow with this port alone."""
        with_others = [(o, g) for o, g in seen[partner] if o != port]
        return (any(_fast(g, threshold) for _, g in with_others)
                or (partner in good_set and not with_others))

    verdicts = []
    for port in sorted(new):
        tried = seen.get(port, [])
        fast = [(o, g) for o, g in tried if _fast(g, threshold)]
        if fast:
            partner, gbps = max(fast, key=lambda t: t[1] or 0.0)
            verdicts.append(PortVerdict(port, PASS, gbps, f"with {partner}"))
            continue
        if not tried:
            verdicts.append(PortVerdict(port, UNPROVEN, None,
                                        f"no other host on rail {port.rail} to test with"))
            continue
        best = max((g for _, g in tried if g is not None), default=None)
        shown = ", ".join(f"{_shown(g)} with {o}" for o, g in tried)
        if any(cleared(o, port) for o, _ in tried):
            verdicts.append(PortVerdict(port, FAIL, best, f"slow: {shown}; its partners are "
                                        "fast with others"))
        else:
            verdicts.append(PortVerdict(port, UNPROVEN, best, f"slow: {shown}; no third port on "
                                        f"rail {port.rail} tells which end is slow"))
    return verdicts
