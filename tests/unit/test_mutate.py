"""tests/mutate.py, the in-house mutator behind `invoke mutate`: which mutants it makes, and
that a run counts a mutant the tests notice as killed and one they miss as a survivor."""

import ast
import json
import textwrap

import pytest

import mutate

SOURCE = textwrap.dedent('''\
    """A module's docstring: never mutated."""
    __all__ = ["check", "Box"]
    LIMIT = 3
    KINDS = ("a", "b")


    def check(x: int = 0, flag: bool = False) -> bool:
        """A docstring, and annotations: never mutated."""
        log.info("checking %d", 7)
        if x < LIMIT and not flag:
            return x + 1
        for kind in KINDS:
            if kind in SEEN:
                break
        return f"{x == 2}"


    class Box:
        def empty(self):
            return self.size is None
    ''')


def descriptions(source, functions=None):
    return [m.description for m in mutate.mutants(source, functions)]


def test_generation_covers_each_kind_of_change_with_its_line():
    assert descriptions(SOURCE) == [
        "L3: 3 → 4",
        "L4: 'a' dropped from the literal",
        "L4: 'b' dropped from the literal",
        "L7: 0 → 1",  # a default value is behaviour; its annotation is not
        "L7: False → True",
        "L10: if condition negated",
        "L10: and → or",
        "L10: < → <=",
        "L10: < → >=",
        "L10: not removed",
        "L11: return value → return None",
        "L11: + → -",
        "L11: 1 → 2",
        "L13: if condition negated",
        "L13: in → not in",
        "L14: break → continue",
        "L15: return value → return None",
        "L20: return value → return None",
        "L20: is → is not",
    ]


def test_docstrings_annotations_all_logging_and_f_string_messages_are_left_alone():
    lines = {m.line for m in mutate.mutants(SOURCE)}
    # 1: docstring, 2: __all__, 8: docstring, 9: a logging call's 7, 15: the f-string's 2
    assert not lines & {1, 2, 8, 9}
    assert [m.description for m in mutate.mutants(SOURCE) if m.line == 15] == [
        "L15: return value → return None"]


def test_each_mutant_parses_differs_from_the_original_and_from_the_others():
    original = ast.unparse(ast.parse(SOURCE))
    found = mutate.mutants(SOURCE)
    assert [m.id for m in found] == [f"M{n}" for n in range(1, len(found) + 1)]
    for m in found:
        ast.parse(m.source)
        assert m.source != original
    assert len({m.source for m in found}) == len(found)


def test_a_mutant_changes_only_its_own_spot():
    (negated,) = [m for m in mutate.mutants(SOURCE) if m.description == "L13: in → not in"]
    assert "if kind not in SEEN:" in negated.source
    assert "if x < LIMIT and (not flag):" in negated.source or \
        "if x < LIMIT and not flag:" in negated.source
    assert "return x + 1" in negated.source


def test_functions_limit_mutation_to_named_definitions_and_constants():
    assert descriptions(SOURCE, ["Box"]) == ["L20: return value → return None",
                                             "L20: is → is not"]
    assert descriptions(SOURCE, ["Box.empty", "LIMIT"]) == [
        "L3: 3 → 4", "L20: return value → return None", "L20: is → is not"]
    assert descriptions(SOURCE, ["nothing"]) == []


def test_a_dataclass_field_without_default_and_a_return_of_none_give_no_mutant():
    source = textwrap.dedent('''\
        @dataclass(frozen=True)
        class A:
            n: int
            m: int = 2

        def f():
            return None
        ''')
    assert descriptions(source) == ["L4: 2 → 3"]


def package(tmp_path, test_body):
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(
        "from pkg.calc import positive\n\n\ndef test_positive():\n" + test_body)
    return src / "calc.py"


CALC = "def positive(x):\n    return x > 0\n"
# positive(5) is True, positive(-1) is False: `x >= 0` passes that too.
TEST = "    assert positive(5) is True\n    assert positive(-1) is False\n"


def test_a_run_counts_the_mutants_the_tests_notice_as_killed_and_lists_the_others(
        tmp_path, monkeypatch, capsys):
    module = package(tmp_path, TEST)
    assert descriptions(CALC) == ["L2: return value → return None", "L2: > → >=",
                                  "L2: > → <=", "L2: 0 → 1"]
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    # Two of them, to keep it short (seed 6 samples these): `return None`, killed, and `>=`,
    # which survives; 50 % is below the minimum.
    code = mutate.main(["--module", "src/pkg/calc.py", "--tests", "test_calc.py", "-j", "2",
                        "--limit", "2", "--seed", "6", "--json", str(tmp_path / "out.json")])
    assert code == 1
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert (result["module"], result["killed"], result["total"], result["score"]) == (
        "src/pkg/calc.py", 1, 2, 50.0)
    assert [(s["where"], s["description"]) for s in result["survivors"]] == [
        ("src/pkg/calc.py:2", "L2: > → >=")]
    out = capsys.readouterr().out
    assert "src/pkg/calc.py: 1/2 killed (50.0 %)" in out
    assert "survived: src/pkg/calc.py:2 L2: > → >=" in out
    assert "below 90 %: src/pkg/calc.py" in out
    assert module.read_text() == CALC  # the original intact
    # A test for the survivor; --rerun runs only it again, and counts the rest as killed.
    (tmp_path / "test_calc.py").write_text((tmp_path / "test_calc.py").read_text()
                                           + "    assert positive(0) is False\n")
    code = mutate.main(["--module", "src/pkg/calc.py", "--tests", "test_calc.py", "--limit", "2",
                        "--seed", "6", "--rerun", str(tmp_path / "out.json")])
    assert code == 0
    assert "src/pkg/calc.py: 2/2 killed (100.0 %)" in capsys.readouterr().out


def test_a_run_stops_when_the_unmutated_tests_fail(tmp_path):
    module = package(tmp_path, "    assert positive(0)\n")
    with pytest.raises(mutate.BaselineFailed, match="unmutated tests fail"):
        mutate.run(module, ["test_calc.py"], src=tmp_path / "src", cwd=tmp_path, limit=1)
