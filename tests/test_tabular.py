"""The privacy-level measure: the paper's worked example, Bkakria et al.'s DR vectors, edge cases, I/O, CLI."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import assert_file_refused, examples
from spacy_delink.cli import app
from spacy_delink.errors import InputError
from spacy_delink.tabular import (
    check_generalization,
    conditional_entropy,
    discrimination_rate,
    entropy,
    entropy_change,
    joint_entropy,
    load_table,
    local_privacy_level,
    mutual_information,
    privacy_level,
    release_statistics,
)
from spacy_delink.tabular.anonymize import Hierarchy
from spacy_delink.tabular.emd import equal_emd, hierarchical_emd, ordered_emd, tree_from_paths
from spacy_delink.tabular.release import generalizes

LOG2_3 = math.log2(3)
LOG2_9 = math.log2(9)

# Zang & Zhu, Table 1 (the salary/disease table of Li et al.'s t-closeness paper).
ORIGINAL_ROWS = [
    ("47677", 29, "3K", "gastric ulcer"),
    ("47602", 22, "4K", "gastritis"),
    ("47678", 27, "5K", "stomach cancer"),
    ("47905", 43, "6K", "gastritis"),
    ("47909", 52, "11K", "flu"),
    ("47906", 47, "8K", "bronchitis"),
    ("47605", 30, "7K", "bronchitis"),
    ("47673", 36, "9K", "pneumonia"),
    ("47607", 32, "10K", "stomach cancer"),
]
# Table 2: zip code and age generalized (three classes of three rows).
ANONYMIZED_ROWS = [
    ("4767*", "<=40", "3K", "gastric ulcer"),
    ("4760*", "<=40", "4K", "gastritis"),
    ("4767*", "<=40", "5K", "stomach cancer"),
    ("4790*", ">=40", "6K", "gastritis"),
    ("4790*", ">=40", "11K", "flu"),
    ("4790*", ">=40", "8K", "bronchitis"),
    ("4760*", "<=40", "7K", "bronchitis"),
    ("4767*", "<=40", "9K", "pneumonia"),
    ("4760*", "<=40", "10K", "stomach cancer"),
]
FIELDS = ("zip", "age", "salary", "disease")


def as_records(rows: list[tuple]) -> list[dict]:
    return [dict(zip(FIELDS, row)) for row in rows]


def write_csv(path: Path, rows: list[tuple], delimiter: str = ",", header: tuple = FIELDS) -> Path:
    lines = [delimiter.join(header)] + [delimiter.join(str(v) for v in row) for row in rows]
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    return path


def brute_entropy(*columns: list) -> float:
    """Plug-in entropy of the joint tuples, written out with Counter as an oracle."""
    counts = Counter(zip(*columns))
    n = len(columns[0])
    return -sum(c / n * math.log2(c / n) for c in counts.values())


# --- the paper's worked example ------------------------------------------------------------

def test_worked_example_matches_the_paper() -> None:
    report = privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS), ["zip", "age"], ["salary", "disease"])
    # PL(D) = (1 - 1.58/3.17) * 3.17/3.17: salary is unique per row, each class holds 3 rows.
    assert report.overall.entropy_anonymized == pytest.approx(LOG2_9)
    assert report.overall.entropy_anonymized_given_known == pytest.approx(LOG2_3)
    assert report.information_ratio == pytest.approx(1.0)
    assert report.privacy_level == pytest.approx(0.5)
    assert report.per_sensitive["salary"].privacy_level == pytest.approx(0.5)
    # Disease: counts 1,2,2,1,2,1 over 9 rows give H = 2.50; every class holds 3 distinct diseases.
    disease = report.per_sensitive["disease"]
    assert disease.entropy_anonymized == pytest.approx(3 / 9 * LOG2_9 + 6 / 9 * math.log2(4.5))
    assert disease.entropy_anonymized == pytest.approx(2.50, abs=0.005)
    assert disease.privacy_level == pytest.approx(1 - LOG2_3 / disease.entropy_anonymized)
    assert disease.privacy_level == pytest.approx(0.37, abs=0.005)
    # Age given zip: released age is 6 x "<=40", 3 x ">=40" (H = 0.92) and zip determines it.
    age = report.local["age"]
    assert age.known == ("zip",)
    assert age.entropy_anonymized == pytest.approx(0.918, abs=0.001)
    assert age.entropy_anonymized_given_known == pytest.approx(0.0, abs=1e-12)
    assert age.privacy_level == pytest.approx(age.entropy_anonymized / LOG2_9)
    assert age.privacy_level == pytest.approx(0.29, abs=0.005)
    # EC = (H(zip, age released) + H(prv)) / (H(zip, age) + H(prv)) = (log2 3 + log2 9) / (2 log2 9).
    assert report.entropy_change == pytest.approx((LOG2_3 + LOG2_9) / (2 * LOG2_9))


def test_local_privacy_level_removes_the_attribute_from_the_known_set() -> None:
    measure = local_privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS), "age", ["zip", "age"])
    assert measure.known == ("zip",)
    assert measure.privacy_level == pytest.approx(0.2897, abs=1e-4)
    alone = local_privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS), "age", [])
    assert alone.discrimination_rate == 0.0  # an adversary who knows nothing cannot discriminate


# --- Bkakria et al. 2021, Table 4 ------------------------------------------------------------

IDS = list(range(1, 9))
AGE_5 = [30, 30, 30, 30, 47, 47, 47, 47]


@pytest.mark.parametrize(
    ("ages", "expected"),
    [
        ([20, 25, 30, 35, 40, 47, 52, 60], 1.0),
        ([30] * 8, 0.0),
        ([30] * 7 + [47], 0.1812),
        ([30] * 6 + [47] * 2, 0.2704),
        (AGE_5, 0.3333),
    ],
)
def test_discrimination_rate_of_the_id_given_age(ages: list[int], expected: float) -> None:
    assert discrimination_rate([IDS], [ages]) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize(
    ("diseases", "expected"),
    [
        (["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"], 0.3333),
        # Both diabetes records share an age group; split across groups DR would be 0.2727.
        (["diabetes", "diabetes", "d3", "d4", "d5", "d6", "d7", "d8"], 0.3636),
        # Four diabetes in one age group, the fifth with the three unique diseases in the other.
        (["diabetes"] * 4 + ["diabetes", "d6", "d7", "d8"], 0.3543),
    ],
)
def test_discrimination_rate_of_the_disease_given_age(diseases: list[str], expected: float) -> None:
    assert discrimination_rate([diseases], [AGE_5]) == pytest.approx(expected, abs=5e-5)


def test_report_discrimination_rate_equals_the_standalone_one() -> None:
    records = [{"id": i, "age": a} for i, a in zip(IDS, [30] * 6 + [47] * 2)]
    report = privacy_level(records, records, ["age"], ["id"])
    assert report.discrimination_rate == pytest.approx(0.2704, abs=5e-5)
    assert report.information_ratio == pytest.approx(1.0)  # nothing anonymized: all information kept


# --- entropy functions -----------------------------------------------------------------------

def test_entropies_by_hand() -> None:
    bit = ["a", "a", "b", "b"]
    other = ["x", "y", "x", "y"]
    assert entropy([bit]) == pytest.approx(1.0)
    assert entropy([bit, other]) == pytest.approx(2.0)
    assert joint_entropy([bit], [other]) == pytest.approx(2.0)
    assert conditional_entropy([bit], [other]) == pytest.approx(1.0)
    assert conditional_entropy([bit], [bit]) == pytest.approx(0.0)
    assert mutual_information([bit], [other]) == pytest.approx(0.0)
    assert mutual_information([bit], [bit]) == pytest.approx(1.0)
    assert entropy([]) == 0.0


def test_missing_values_are_one_value_of_their_own() -> None:
    column = [None, float("nan"), "a", "a"]
    assert entropy([column]) == pytest.approx(1.0)


def test_a_bare_column_is_rejected_with_a_hint() -> None:
    with pytest.raises(InputError, match=r"list of columns"):
        entropy(["a", "b"])  # type: ignore[list-item]


small_columns = st.integers(min_value=1, max_value=30).flatmap(
    lambda n: st.tuples(*(st.lists(st.integers(0, 3), min_size=n, max_size=n) for _ in range(3)))
)


@settings(max_examples=examples(60))
@given(small_columns)
def test_entropy_functions_agree_with_a_counting_oracle(columns: tuple[list[int], list[int], list[int]]) -> None:
    x, y, z = columns
    assert entropy([x, y]) == pytest.approx(brute_entropy(x, y), abs=1e-9)
    assert conditional_entropy([x], [y, z]) == pytest.approx(brute_entropy(x, y, z) - brute_entropy(y, z), abs=1e-9)
    assert mutual_information([x], [y]) == pytest.approx(mutual_information([y], [x]), abs=1e-9)
    assert mutual_information([x], [y]) <= min(entropy([x]), entropy([y])) + 1e-9
    assert 0.0 <= discrimination_rate([x], [y, z]) <= 1.0


# --- defined edge cases and errors -------------------------------------------------------------

def test_constant_columns_give_zero_not_a_division_error() -> None:
    original = [{"q": i % 3, "s": "same"} for i in range(6)]
    report = privacy_level(original, original, ["q"], ["s"])
    assert (report.discrimination_rate, report.information_ratio, report.privacy_level) == (0.0, 0.0, 0.0)
    constant = [{"q": "*", "s": "same"} for _ in range(6)]
    assert entropy_change(constant, constant, ["q"], ["s"]) == 1.0
    growing = [{"q": "*", "s": str(i)} for i in range(6)]
    assert entropy_change(constant, growing, ["q"], ["s"]) == math.inf
    assert privacy_level(constant, growing, ["q"], ["s"], check=False).to_dict()["entropy_change"] is None


def test_row_count_mismatch_is_an_error() -> None:
    with pytest.raises(InputError, match=r"row counts differ: original has 9 rows, anonymized has 8"):
        privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS[:8]), "zip,age", "salary")


def test_unknown_column_and_bad_roles_are_errors() -> None:
    original, anonymized = as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS)
    with pytest.raises(InputError, match=r"original: no column 'zipcode' \(columns: zip, age, salary, disease\)"):
        privacy_level(original, anonymized, "zipcode,age", "salary")
    with pytest.raises(InputError, match=r"both quasi-identifier and sensitive"):
        privacy_level(original, anonymized, "zip,age", "age")
    with pytest.raises(InputError, match=r"no sensitive columns given"):
        privacy_level(original, anonymized, "zip,age", "")
    with pytest.raises(InputError, match=r"repeat a name"):
        privacy_level(original, anonymized, ["zip", "zip"], "salary")


def test_rows_pair_by_id_column_whatever_their_order() -> None:
    original = [dict(record, id=str(i)) for i, record in enumerate(as_records(ORIGINAL_ROWS))]
    anonymized = [dict(record, id=i) for i, record in enumerate(as_records(ANONYMIZED_ROWS))]
    random.Random(7).shuffle(anonymized)
    report = privacy_level(original, anonymized, "zip,age", "salary,disease", id_column="id")
    assert report.privacy_level == pytest.approx(0.5)
    assert report.per_sensitive["disease"].privacy_level == pytest.approx(1 - LOG2_3 / brute_entropy([r[3] for r in ORIGINAL_ROWS]))
    # Positional pairing after the shuffle mixes up whose disease is whose: the check refuses it ...
    with pytest.raises(InputError, match=r"anonymized is not a generalization of original: \d+ of 36 cells"):
        privacy_level(original, anonymized, "zip,age", "salary,disease")
    # ... and the measure taken anyway shows the damage.
    by_position = privacy_level(original, anonymized, "zip,age", "salary,disease", check=False)
    assert by_position.per_sensitive["disease"].information_ratio < 0.9
    assert not by_position.generalization.ok
    without_last = [record for record in anonymized if record["id"] != 8]
    with pytest.raises(InputError, match=r"id '8' from original is missing"):
        privacy_level(original, without_last, "zip,age", "salary", id_column="id")
    with pytest.raises(InputError, match=r"occurs twice"):
        privacy_level(original, anonymized + anonymized[:1], "zip,age", "salary", id_column="id")


# --- table sources -----------------------------------------------------------------------------

@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_csv_delimiter_is_detected(tmp_path: Path, delimiter: str) -> None:
    original = write_csv(tmp_path / "original.csv", ORIGINAL_ROWS, delimiter)
    anonymized = write_csv(tmp_path / "anonymized.csv", ANONYMIZED_ROWS, delimiter)
    table = load_table(original)
    assert list(table.columns) == list(FIELDS) and table.n_rows == 9
    assert privacy_level(original, anonymized, "zip,age", "salary,disease").privacy_level == pytest.approx(0.5)


def test_csv_errors_name_file_and_line(tmp_path: Path) -> None:
    assert_file_refused(load_table, tmp_path / "ragged.csv", "a,b\n1,2\n3\n", r"ragged.csv:3: 1 fields where the header has 2")
    assert_file_refused(load_table, tmp_path / "absent.csv", None, r"no such file")
    empty_cells = tmp_path / "cells.csv"
    empty_cells.write_text("a,b\n,1\nx,2\n", encoding="utf-8")
    assert load_table(empty_cells).column("a") == [None, "x"]


def test_pandas_and_pyarrow_tables_give_the_same_report() -> None:
    pandas = pytest.importorskip("pandas")
    expected = privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS), "zip,age", "salary,disease")
    frame_original = pandas.DataFrame(as_records(ORIGINAL_ROWS))
    frame_anonymized = pandas.DataFrame(as_records(ANONYMIZED_ROWS))
    assert privacy_level(frame_original, frame_anonymized, "zip,age", "salary,disease") == expected
    pyarrow = pytest.importorskip("pyarrow")
    arrow_original = pyarrow.Table.from_pylist(as_records(ORIGINAL_ROWS))
    arrow_anonymized = pyarrow.Table.from_pylist(as_records(ANONYMIZED_ROWS))
    assert privacy_level(arrow_original, arrow_anonymized, "zip,age", "salary,disease") == expected


# --- command line ------------------------------------------------------------------------------

def test_cli_privacy_level_json_and_table(tmp_path: Path) -> None:
    original = write_csv(tmp_path / "original.csv", ORIGINAL_ROWS, ";")
    anonymized = write_csv(tmp_path / "anonymized.csv", ANONYMIZED_ROWS, ";")
    report_path = tmp_path / "report.json"
    runner = CliRunner()
    args = ["privacy-level", str(original), str(anonymized), "--qi", "zip,age", "--sensitive", "salary,disease"]
    result = runner.invoke(app, [*args, "--local", "--json", "--output", str(report_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["overall"]["privacy_level"] == pytest.approx(0.5)
    assert report["local"]["age"]["privacy_level"] == pytest.approx(0.2897, abs=1e-4)
    assert json.loads(report_path.read_text(encoding="utf-8")) == report
    table = runner.invoke(app, args)
    assert table.exit_code == 0
    assert "salary, disease" in table.stdout and "0.5000" in table.stdout and "entropy change EC" in table.stdout


def test_cli_reports_bad_input_with_exit_status_1(tmp_path: Path) -> None:
    original = write_csv(tmp_path / "original.csv", ORIGINAL_ROWS)
    anonymized = write_csv(tmp_path / "anonymized.csv", ANONYMIZED_ROWS[:5])
    result = subprocess.run(
        [sys.executable, "-m", "spacy_delink", "privacy-level", str(original), str(anonymized),
         "--qi", "zip,age", "--sensitive", "salary"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: row counts differ")


# --- the release itself: a generalization of the original? its k, l, t and risks --------------

DISEASE_TREE = Hierarchy(
    {
        **{d: (d, "stomach diseases", "digestive system diseases", "*") for d in ("gastric ulcer", "gastritis", "stomach cancer")},
        **{d: (d, "respiratory infection", "respiratory system diseases", "*") for d in ("flu", "bronchitis", "pneumonia")},
    },
    "disease (Li et al. 2007, Figure 2)",
)


def with_numeric_salary(rows: list[tuple]) -> list[dict]:
    return [dict(record, salary=int(record["salary"][:-1]) * 1000) for record in as_records(rows)]


@pytest.mark.parametrize(
    ("released", "original", "expected"),
    [
        ("4767*", "47677", True), ("4767*", "47602", False), ("47***", "47602", True), ("*", "anything", True),
        (None, "x", True), ("<=40", 29, True), ("<=40", 43, False), (">=40", 43, True), ("≤40", 40, True),
        ("20-29", "25", True), ("20-29", 30, False), ("[20, 30)", 30, False), ("(20,30]", 30, True),
        ("a?b", "axb", False), ("same", "same", True), ("other", "same", False),
    ],
)
def test_generalization_rules(released, original, expected: bool) -> None:
    assert generalizes(released, original) is expected


def test_the_check_catches_rows_that_cannot_come_from_the_original() -> None:
    original, anonymized = as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS)
    assert check_generalization(load_table(original), load_table(anonymized), FIELDS).ok
    # row 4 (age 43) released under "<=40", row 7 (zip 47605) under "4767*"
    broken = [dict(record) for record in anonymized]
    broken[3]["age"], broken[6]["zip"] = "<=40", "4767*"
    with pytest.raises(InputError, match=r"2 of 36 cells \(row 4 age: '<=40' cannot stand for 43; row 7 zip: '4767\*' cannot stand for '47605'\)"):
        privacy_level(original, broken, "zip,age", "salary,disease")
    report = privacy_level(original, broken, "zip,age", "salary,disease", check=False)
    assert report.generalization.violations == 2 and report.release.risks.journalist_highest is None
    # With a hierarchy, only labels on the value's own path count: "respiratory infection" cannot stand for gastritis.
    relabelled = [dict(record) for record in anonymized]
    relabelled[1]["disease"] = "stomach diseases"
    assert privacy_level(original, relabelled, "zip,age", "salary,disease", hierarchies={"disease": DISEASE_TREE}).generalization.ok
    relabelled[1]["disease"] = "respiratory infection"
    with pytest.raises(InputError, match="row 2 disease: 'respiratory infection' cannot stand for 'gastritis'"):
        privacy_level(original, relabelled, "zip,age", "salary,disease", hierarchies={"disease": DISEASE_TREE})


def test_release_k_l_t_and_risks_of_the_worked_example() -> None:
    report = privacy_level(
        with_numeric_salary(ORIGINAL_ROWS), with_numeric_salary(ANONYMIZED_ROWS), "zip,age", "salary,disease",
        hierarchies={"disease": DISEASE_TREE},
    )
    release = report.release
    assert (release.classes, release.k, release.l) == (3, 3, {"salary": 3, "disease": 3})
    # Li et al.'s "0.167-closeness w.r.t. salary": ordered EMD of class {3K, 5K, 9K} is 1/6.
    assert release.t["salary"] == pytest.approx(1 / 6) and release.ground_distance["salary"] == "ordered"
    # Tree distance, class 4790* = {gastritis, flu, bronchitis}: 8/27 (a linear program below agrees).
    assert release.t["disease"] == pytest.approx(8 / 27) and release.ground_distance["disease"] == "hierarchical"
    risks = release.risks
    assert (risks.prosecutor_highest, risks.prosecutor_average, risks.prosecutor_records_at_highest) == pytest.approx((1 / 3, 1 / 3, 1.0))
    assert (risks.journalist_highest, risks.marketer) == pytest.approx((1 / 3, 1 / 3))
    plain = privacy_level(as_records(ORIGINAL_ROWS), as_records(ANONYMIZED_ROWS), "zip,age", "salary,disease").release
    assert plain.ground_distance == {"salary": "equal", "disease": "equal"}


def test_journalist_risk_counts_population_rows_a_locally_recoded_value_also_fits() -> None:
    original = [{"zip": z, "s": s} for z, s in [("1301", "a"), ("1302", "b"), ("1401", "a"), ("1402", "b"), ("1403", "a")]]
    # classes 130* (2 rows) and 1*** (3 rows); 1*** also fits the two 130x rows of the population
    released = [{"zip": z, "s": s} for z, s in [("130*", "a"), ("130*", "b"), ("1***", "a"), ("1***", "b"), ("1***", "a")]]
    risks = release_statistics(load_table(original), load_table(released), ["zip"], ["s"]).risks
    assert risks.prosecutor_highest == pytest.approx(1 / 2) and risks.prosecutor_average == pytest.approx(2 / 5)
    assert risks.journalist_highest == pytest.approx(1 / 2)
    assert risks.marketer == pytest.approx((2 * (1 / 2) + 3 * (1 / 5)) / 5)


def transport_oracle(p: np.ndarray, q: np.ndarray, ground: np.ndarray) -> float:
    """EMD as the optimal transport of p onto q under the ground distance (a linear program)."""
    from scipy.optimize import linprog

    m = len(p)
    rows = [np.kron(np.eye(m)[i], np.ones(m)) for i in range(m)] + [np.kron(np.ones(m), np.eye(m)[j]) for j in range(m)]
    return float(linprog(ground.ravel(), A_eq=np.array(rows), b_eq=np.concatenate([p, q]), bounds=(0, None)).fun)


def test_emds_agree_with_optimal_transport() -> None:
    rng = np.random.default_rng(3)
    values = list(DISEASE_TREE.paths)
    tree = tree_from_paths(values, DISEASE_TREE.paths, DISEASE_TREE.source)
    paths = [DISEASE_TREE.paths[v] for v in values]
    tree_distance = np.array([[next(h for h in range(4) if a[h] == b[h]) / 3 for b in paths] for a in paths])
    m = len(values)
    ordered_distance = np.abs(np.subtract.outer(np.arange(m), np.arange(m))) / (m - 1)
    share = rng.dirichlet(np.ones(m), size=8)
    overall = rng.dirichlet(np.ones(m))
    for emd_of, ground in (
        (lambda s: hierarchical_emd(s, overall, tree), tree_distance),
        (lambda s: ordered_emd(s, overall), ordered_distance),
        (lambda s: equal_emd(s, overall), 1.0 - np.eye(m)),
    ):
        assert emd_of(share) == pytest.approx([transport_oracle(p, overall, ground) for p in share], abs=1e-7)
