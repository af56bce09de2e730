"""RDMA acceptance pairs (pure): who tests with whom, retests of slow pairs, and blame."""

from racklift.verify.pairing import (
    FAIL,
    PASS,
    UNPROVEN,
    Pair,
    RailPort,
    first_pairs,
    judge_pairs,
    retest_pairs,
    rounds,
)

THRESHOLD = 370.0
LINE = 390.0  # what a healthy NDR pair reaches
SLOW = 120.0


def ports(hosts, rail="ib-leaf-1", port="mlx5_0"):
    return [RailPort(h, port, rail) for h in hosts]


def measure(pairs, slow_ends=()):
    """What ib_write_bw reports for each pair: the slower end's rate."""
    return {p: SLOW if set(p.ends) & set(slow_ends) else LINE for p in pairs}


def run_all(new, good=(), slow_ends=()):
    """First tests, retests of the slow pairs, then the verdicts: as the stage runs them."""
    results = measure(first_pairs(new, good), slow_ends)
    results |= measure(retest_pairs(results, THRESHOLD, new, good), slow_ends)
    return {(v.port.host, v.outcome) for v in judge_pairs(results, THRESHOLD, new, good)}


def test_new_hosts_pair_two_by_two_on_each_rail_and_an_odd_one_with_the_first():
    a, b, c = ports("abc")
    assert first_pairs([a, b, c]) == [Pair(a, b), Pair(c, a)]
    other_rail = RailPort("d", "mlx5_1", "ib-leaf-2")
    assert Pair(other_rail, a) not in first_pairs([a, b, c, other_rail])


def test_known_good_ports_take_every_new_port_of_their_rail_in_turn():
    a, b, c = ports("abc")
    g1, g2 = ports(["good1", "good2"])
    assert first_pairs([a, b, c], [g1, g2]) == [Pair(a, g1), Pair(b, g2), Pair(c, g1)]


def test_rounds_never_use_a_port_twice():
    a, b, c = ports("abc")
    g1 = ports(["good1"])[0]
    assert rounds(first_pairs([a, b, c], [g1])) == [[Pair(a, g1)], [Pair(b, g1)],
                                                    [Pair(c, g1)]]
    assert rounds([Pair(a, b), Pair(c, g1)]) == [[Pair(a, b), Pair(c, g1)]]


def test_a_slow_host_among_four_is_blamed_and_its_first_partner_cleared():
    new = ports(["h0", "h1", "h2", "h3"])
    assert run_all(new, slow_ends=[new[1]]) == {("h0", PASS), ("h1", FAIL), ("h2", PASS),
                                               ("h3", PASS)}


def test_the_blamed_port_names_its_figures_and_partners():
    new = ports(["h0", "h1", "h2", "h3"])
    results = measure(first_pairs(new), [new[1]])
    results |= measure(retest_pairs(results, THRESHOLD, new), [new[1]])
    (h1,) = [v for v in judge_pairs(results, THRESHOLD, new) if v.port.host == "h1"]
    assert h1.gbps == SLOW
    assert "120 Gb/s with h0 mlx5_0" in h1.why and "with h2 mlx5_0" in h1.why


def test_with_a_known_good_partner_the_new_port_is_blamed():
    new, good = ports(["h0"]), ports(["good1"])
    assert run_all(new, good, slow_ends=[new[0]]) == {("h0", FAIL)}


def test_two_new_hosts_alone_on_a_rail_are_never_both_blamed():
    new = ports(["h0", "h1"])
    assert run_all(new, slow_ends=[new[0]]) == {("h0", UNPROVEN), ("h1", UNPROVEN)}
    assert run_all(new) == {("h0", PASS), ("h1", PASS)}


def test_a_port_alone_on_its_rail_is_unproven():
    (v,) = judge_pairs({}, THRESHOLD, ports(["h0"]))
    assert v.outcome == UNPROVEN and "no other host on rail ib-leaf-1" in v.why


def test_no_result_is_slow():
    new = ports(["h0", "h1", "h2", "h3"])
    results = {p: (None if new[1] in p.ends else LINE) for p in first_pairs(new)}
    results |= {p: (None if new[1] in p.ends else LINE)
                for p in retest_pairs(results, THRESHOLD, new)}
    verdicts = {v.port.host: v for v in judge_pairs(results, THRESHOLD, new)}
    assert verdicts["h1"].outcome == FAIL and "no result with h0 mlx5_0" in verdicts["h1"].why
    assert verdicts["h0"].outcome == PASS


def test_a_port_alone_on_its_rail_is_paired_with_nobody_not_with_itself():
    (a,) = ports("a")
    assert first_pairs([a]) == []
    assert first_pairs([a, *ports("b", rail="ib-leaf-2")]) == []


def test_a_retest_prefers_a_new_port_that_was_fast_over_one_that_was_slow():
    a, b, c, d, e, f = new = ports("abcdef")
    results = {Pair(a, b): SLOW, Pair(c, d): SLOW, Pair(e, f): LINE}
    # a and b each with e (fast with f), not with c or d (themselves slow)
    assert retest_pairs(results, THRESHOLD, new) == [Pair(a, e), Pair(b, e), Pair(c, e),
                                                     Pair(d, e)]


def test_a_pair_exactly_at_the_threshold_passes():
    a, b = new = ports("ab")
    verdicts = judge_pairs({Pair(a, b): THRESHOLD}, THRESHOLD, new)
    assert [(v.port.host, v.outcome, v.gbps) for v in verdicts] == [
        ("a", PASS, THRESHOLD), ("b", PASS, THRESHOLD)]
    assert retest_pairs({Pair(a, b): THRESHOLD}, THRESHOLD, new) == []


def test_a_port_fast_with_several_partners_reports_its_best_figure_and_partner():
    a, b, c = new = ports("abc")
    results = {Pair(a, b): 380.0, Pair(a, c): 395.0}
    (va,) = [v for v in judge_pairs(results, THRESHOLD, new) if v.port == a]
    assert (va.outcome, va.gbps, va.why) == (PASS, 395.0, "with c mlx5_0")


def test_every_new_port_gets_a_verdict_after_one_with_nobody_to_test_with():
    (a,) = ports("a", rail="ib-leaf-1")
    b, c = ports("bc", rail="ib-leaf-2")
    verdicts = judge_pairs({Pair(b, c): LINE}, THRESHOLD, [a, b, c])
    assert [(v.port.host, v.outcome) for v in verdicts] == [("a", UNPROVEN), ("b", PASS),
                                                            ("c", PASS)]
