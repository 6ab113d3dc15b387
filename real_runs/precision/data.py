"""Data sets of the precision study: hurricanes, scikit-learn's digits, any CSV.

Each loader returns a :class:`StudyData` — float64 inputs, targets, a fixed train/test
split and the no-skill forecast the network must beat — read through
:mod:`testbed.io.read` and checked (every value finite, the target column present),
with errors naming the file, line and column.

**hurricanes** (``testbed/data/hurricanes/``, see its README): forecast the number of
Atlantic hurricanes in a month from the month of year (as sin and cos of its angle on
the yearly cycle — a one-hot month would be stored exactly at every precision and
hide the loss), the Niño 1+2 sea-surface temperature of the month before (known when
the forecast is made) and the counts of the two months before and of the same month
a year earlier. Targets are the
months of 1976–2000 for training (1975 only serves as history for the year-ago count)
and 2001–2010 for testing (the SST series ends in 2010). It is a *count* task: the
network regresses the count (the conditional mean, like climatology), the forecast is
that value rounded to a whole non-negative count, scored by exact-count accuracy and
mean absolute error in storms. The no-skill forecast is climatology: the month's mean
count over the training years, rounded the same way; persistence (last month's count)
and zero are the other baselines. The test months are bootstrapped by year, and the
data's gaps are disclosed (:func:`hurricane_disclosures`). ``hurricanes-1979`` is the
same task trained on 1979–2000 only, the years with complete storm records.

**digits**: the 1797 8×8 handwritten digits bundled with scikit-learn (no download),
17 grey levels 0…16, ten classes; a fixed shuffled 75/25 split. No-skill forecast:
the most frequent training class; the nearest class mean is a baseline with skill.

**FILE.csv** with ``--target COLUMN``: every other column is an input and must be
numeric. A target of integers with at most :data:`MAX_CLASSES` distinct values is a
classification (no-skill: the most frequent class), anything else a regression (no-skill:
the training mean; accuracy does not apply, MAE and R² do). Fixed shuffled 75/25 split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from testbed.errors import InputError, UnknownNameError
from testbed.streams import generator

#: Shipped hurricane series (testbed/data/hurricanes/<name>.csv).
HURRICANE_FILE = "atlantic_monthly_1975_2022"
#: Targets of the hurricane task: the count columns of the file.
HURRICANE_TARGETS = ("hurricanes", "named_storms")
#: Training and test target years (inclusive); SST ends in 2010 (README).
TRAIN_YEARS, TEST_YEARS = (1976, 2000), (2001, 2010)
#: The first year whose storms are complete: "Storms from 1979
#: onward are measured every six hours during the lifetime of the storm. Storms in
#: earlier years have some missing data." (dplyr, ``?storms``, the source's documentation)
COMPLETE_FROM = 1979
#: Hurricanes of the 1995 Atlantic season (NHC's season summary: 19 named storms, 11
#: hurricanes, 5 major), against which the file's monthly counts of 1995 are summed.
SEASON_1995_HURRICANES = 11
#: History lags (months) of the count inputs: the two months before, a year before.
COUNT_LAGS = (1, 2, 12)
#: Most distinct integer target values a CSV target may have to count as classes.
MAX_CLASSES = 20
#: Share of a shuffled data set held out for testing.
TEST_FRACTION = 0.25
#: Fixed seed of the shuffled splits: the split is part of the data set, not of a run.
SPLIT_SEED = 20_250_101
#: Fewest rows a CSV data set needs (so both splits have a few).
MIN_ROWS = 8
DATASETS = ("hurricanes", "digits", "breast-cancer")

Task = Literal["classification", "regression", "count"]


@dataclass(frozen=True)
class NoSkill:
    """The reference forecast: its name and its test predictions (target values)."""

    name: str
    predictions: np.ndarray


@dataclass(frozen=True)
class StudyData:
    """Inputs (float64, samples × features), targets and the no-skill forecast.

    ``y_test`` holds target values. For a classification ``y_train`` holds class
    indices into ``class_values`` (the target value of each class, from the training
    set); for a regression or a count task it holds target values (a count forecast is
    rounded to a whole non-negative count before it is scored).

    ``baselines`` are the reference forecasts a network with skill must beat (the
    no-skill forecast first); ``blocks`` labels each test item with the unit a
    bootstrap resamples (the item itself, or for a time series its year);
    ``disclosures`` say what the data cannot show."""

    name: str
    task: Task
    target: str
    features: tuple[str, ...]
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    no_skill: NoSkill
    class_values: tuple[float, ...] = ()
    split: str = ""
    baselines: tuple[NoSkill, ...] = ()
    blocks: np.ndarray | None = None
    block_name: str = "test item"
    disclosures: tuple[str, ...] = ()

    @property
    def classes(self) -> int:
        return len(self.class_values)

    @property
    def references(self) -> tuple[NoSkill, ...]:
        """The baselines (the no-skill forecast alone when none were given)."""
        return self.baselines or (self.no_skill,)

    @property
    def test_blocks(self) -> np.ndarray:
        return self.blocks if self.blocks is not None else np.arange(len(self.y_test))


def load_dataset(dataset: str, target: str | None = None) -> StudyData:
    """The data set called ``dataset`` (hurricanes, digits, breast-cancer) or read from a
    CSV path."""
    if dataset == "hurricanes":
        return hurricanes(target or "hurricanes")
    if dataset == "hurricanes-1979":
        return hurricanes(target or "hurricanes", first_train_year=COMPLETE_FROM)
    if dataset == "digits":
        if target is not None:
            raise InputError("digits has a fixed target (the digit); drop --target",
                             field="--target")
        return digits()
    if dataset == "breast-cancer":
        if target is not None:
            raise InputError("breast-cancer has a fixed target (the diagnosis); drop --target",
                             field="--target")
        return breast_cancer()
    if dataset.lower().endswith(".csv") or Path(dataset).exists():
        if not target:
            raise InputError("a CSV data set needs --target COLUMN", field="--target")
        return csv_dataset(dataset, target)
    raise UnknownNameError(f"unknown data set {dataset!r}; choose {', '.join(DATASETS)} "
                           "or give a FILE.csv", field="--dataset")


def _number(text: str, *, source: str, line: int, column: str) -> float:
    if text is None or text.strip() == "":
        raise InputError("missing value (NaN); the study needs every value",
                         source=source, line=line, field=column)
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}", source=source, line=line,
                         field=column) from None
    if not np.isfinite(value):
        raise InputError(f"not a finite number: {text!r} (NaN or inf)", source=source,
                         line=line, field=column)
    return value


def _classes(y: np.ndarray) -> tuple[tuple[float, ...], np.ndarray]:
    values = np.unique(y)
    return tuple(float(v) for v in values), np.searchsorted(values, y)


def _most_frequent(y_train_idx: np.ndarray, n_test: int, values: tuple[float, ...]) -> NoSkill:
    """Always the most frequent training class (as a target value)."""
    best = values[int(np.argmax(np.bincount(y_train_idx)))]
    return NoSkill("the most frequent training class", np.full(n_test, best))


def _shuffled_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    order = generator(SPLIT_SEED, "precision.split").permutation(n)
    n_test = max(1, int(round(n * TEST_FRACTION)))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def hurricanes(target: str = "hurricanes", first_train_year: int = TRAIN_YEARS[0]
               ) -> StudyData:
    """The monthly hurricane-count forecast (see the module docstring); training from
    ``first_train_year`` (``COMPLETE_FROM`` leaves out the years with missing fixes)."""
    from testbed.io.packaged import named_file
    from testbed.io.read import read_csv

    if target not in HURRICANE_TARGETS:
        raise InputError(f"hurricanes has targets {', '.join(HURRICANE_TARGETS)}, not "
                         f"{target!r}", field="--target")
    path = named_file("hurricanes", HURRICANE_FILE)
    if path is None:   # pragma: no cover - a broken install
        raise InputError("the shipped hurricane data are missing", source=HURRICANE_FILE)
    source = f"hurricanes/{path.name}"
    rows = read_csv(path, source=source, required=("year", "month", target, "nino12_sst_c"))
    by_month = {}
    for line, row in rows:
        key = (int(_number(row["year"], source=source, line=line, column="year")),
               int(_number(row["month"], source=source, line=line, column="month")))
        by_month[key] = (line, row)

    def back(year: int, month: int, lag: int) -> tuple[int, int]:
        index = year * 12 + (month - 1) - lag
        return index // 12, index % 12 + 1

    def value(key, column):
        line, row = by_month[key]
        return _number(row[column], source=source, line=line, column=column)

    def split(years: tuple[int, int]):
        x, y, months = [], [], []
        for year in range(years[0], years[1] + 1):
            for month in range(1, 13):
                angle = 2 * np.pi * (month - 1) / 12
                season = [round(float(np.sin(angle)), 12), round(float(np.cos(angle)), 12)]
                sst = value(back(year, month, 1), "nino12_sst_c")
                lags = [value(back(year, month, lag), target) for lag in COUNT_LAGS]
                x.append(season + [sst] + lags)
                y.append(value((year, month), target))
                months.append(month)
        return np.array(x), np.array(y), np.array(months)

    train_years = (first_train_year, TRAIN_YEARS[1])
    if not TRAIN_YEARS[0] <= first_train_year < TRAIN_YEARS[1]:
        raise InputError(f"training must start in {TRAIN_YEARS[0]}…{TRAIN_YEARS[1] - 1}, "
                         f"not {first_train_year}", field="first_train_year")
    x_train, y_train, m_train = split(train_years)
    x_test, y_test, m_test = split(TEST_YEARS)
    baselines = _count_baselines(y_train, m_train, m_test, x_test, train_years)
    features = tuple(["month_sin", "month_cos", "nino12_sst_prev_c"]
                     + [f"{target}_lag{lag}" for lag in COUNT_LAGS])
    name = "hurricanes" if first_train_year == TRAIN_YEARS[0] else f"hurricanes-{first_train_year}"
    return StudyData(
        name=name, task="count", target=target, features=features,
        x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
        no_skill=baselines[0], baselines=baselines,
        blocks=np.repeat(np.arange(TEST_YEARS[0], TEST_YEARS[1] + 1), 12), block_name="year",
        disclosures=hurricane_disclosures(by_month, source, target, train_years),
        split=f"train {train_years[0]}–{train_years[1]}, test {TEST_YEARS[0]}–{TEST_YEARS[1]}")


def _count_baselines(y_train: np.ndarray, m_train: np.ndarray, m_test: np.ndarray,
                     x_test: np.ndarray, train_years: tuple[int, int]) -> tuple[NoSkill, ...]:
    """Climatology (the no-skill forecast), persistence and zero for the test months."""
    mean_by_month = {m: y_train[m_train == m].mean() for m in range(1, 13)}
    climatology = NoSkill(f"climatology: the month's mean count over {train_years[0]}–"
                          f"{train_years[1]}, rounded",
                          np.array([mean_by_month[m] for m in m_test]))
    persistence = NoSkill("persistence: last month's count",
                          x_test[:, 3 + COUNT_LAGS.index(1)].copy())
    zero = NoSkill("zero: no hurricane in any month", np.zeros(len(m_test)))
    return climatology, persistence, zero


def hurricane_disclosures(by_month: dict, source: str, target: str,
                          train_years: tuple[int, int]) -> tuple[str, ...]:
    """What the hurricane series cannot show, with the figures from the file itself."""
    def total(year: int, column: str) -> int:
        return int(sum(_number(by_month[(year, m)][1][column], source=source,
                               line=by_month[(year, m)][0], column=column)
                       for m in range(1, 13)))

    years = range(train_years[0], train_years[1] + 1)
    early = [y for y in years if y < COMPLETE_FROM]
    history = train_years[0] - 1
    sst_end = max(y for (y, m), (_, row) in by_month.items() if row["nino12_sst_c"].strip())
    where = (f"training years {early[0]}–{early[-1]} ({len(early)} of {len(years)}) and "
             f"{history} (history for the lags) come from those years; the sensitivity run "
             f"trains on {COMPLETE_FROM}–{train_years[1]} only" if early else
             f"no training year is earlier; {history} enters as history for the lags only")
    out = [f"Missing data before {COMPLETE_FROM}: HURDAT2's storms subset measures storms "
           f"every six hours from {COMPLETE_FROM} on, and 'storms in earlier years have some "
           f"missing data' (dplyr's storms documentation): {where}."]
    out.append(f"A storm active in two calendar months counts in both: the {target} column "
               f"counts distinct storms per month, not storms per season (1995's months sum to "
               f"{total(1995, 'hurricanes')} hurricanes; the season had "
               f"{SEASON_1995_HURRICANES}, NHC), so monthly counts are not independent "
               "events and a year's months are resampled together (block bootstrap by year).")
    out.append(f"Niño 1+2 SST ends in {sst_end}: the test years stop at {TEST_YEARS[1]}, "
               f"{12 * (TEST_YEARS[1] - TEST_YEARS[0] + 1)} months in "
               f"{TEST_YEARS[1] - TEST_YEARS[0] + 1} blocks, so intervals are wide.")
    return tuple(out)


def digits() -> StudyData:
    """scikit-learn's bundled 8×8 digits (no download), fixed shuffled split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:   # pragma: no cover - scikit-learn is a dependency
        raise InputError("the digits data set needs scikit-learn (pip install scikit-learn)",
                         field="--dataset") from None
    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    train, test = _shuffled_split(len(y))
    classes = tuple(float(c) for c in range(10))
    majority = _most_frequent(y[train], len(test), classes)
    levels = np.unique(x)
    return StudyData(
        name="digits", task="classification", target="digit",
        features=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
        x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test].astype(np.float64),
        no_skill=majority, baselines=(majority, _nearest_mean(x[train], y[train], x[test])),
        class_values=classes,
        disclosures=(_exact_levels(levels),),
        split=f"shuffled {1 - TEST_FRACTION:.0%}/{TEST_FRACTION:.0%} (seed {SPLIT_SEED})")


def _exact_levels(levels: np.ndarray) -> str:
    """Which float formats store every grey level exactly (computed, not assumed)."""
    from testbed.precision import to_bfloat16, to_float16, truncate_mantissa
    exact = [name for name, fn in (("fp16", to_float16), ("bf16", to_bfloat16))
             if np.array_equal(fn(levels), levels)]
    bits = next(m for m in range(53) if np.array_equal(truncate_mantissa(levels, m), levels))
    return (f"The pixels are {len(levels)} integer grey levels {levels.min():g}…"
            f"{levels.max():g}: {' and '.join(exact) or 'no float format'} store every one "
            f"exactly, as does mantM from M = {bits}, so only intK and mantM below {bits} "
            "bits change these inputs; a drop can only show there.")


def _nearest_mean(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                  what: str = "training images", scaled: bool = False) -> NoSkill:
    """The class whose mean training input is nearest (Euclidean; ``scaled``: after
    standardising each feature with the training mean and spread): a model-free
    baseline that has skill, so the network must beat more than chance."""
    if scaled:
        centre, spread = x_train.mean(axis=0), x_train.std(axis=0)
        spread = np.where(spread > 0, spread, 1.0)
        x_train, x_test = (x_train - centre) / spread, (x_test - centre) / spread
    classes = np.unique(y_train)
    means = np.stack([x_train[y_train == c].mean(axis=0) for c in classes])
    dist = ((x_test[:, None, :] - means[None, :, :]) ** 2).sum(axis=2)
    return NoSkill(f"nearest class mean ({what}, fp64)",
                   classes[np.argmin(dist, axis=1)].astype(np.float64))


def breast_cancer() -> StudyData:
    """scikit-learn's bundled Wisconsin diagnostic breast-cancer data (no download): 569
    tumours, 30 real-valued measurements each, malignant (0) or benign (1); the fixed
    shuffled split. Unlike digits' integer pixels, fp16 and bf16 do round these inputs."""
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError:   # pragma: no cover - scikit-learn is a dependency
        raise InputError("the breast-cancer data set needs scikit-learn", field="--dataset"
                         ) from None
    bunch = load_breast_cancer()
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    train, test = _shuffled_split(len(y))
    classes = (0.0, 1.0)
    majority = _most_frequent(y[train], len(test), classes)
    return StudyData(
        name="breast-cancer", task="classification", target="benign",
        features=tuple(str(f).replace(" ", "_") for f in bunch.feature_names),
        x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test].astype(np.float64),
        no_skill=majority,
        baselines=(majority, _nearest_mean(x[train], y[train], x[test],
                                           "standardised measurements", scaled=True)),
        class_values=classes,
        disclosures=(_rounded_share(x), f"The test set has {len(test)} tumours: one "
                     f"misclassified is {100 / len(test):.2f} points of accuracy."),
        split=f"shuffled {1 - TEST_FRACTION:.0%}/{TEST_FRACTION:.0%} (seed {SPLIT_SEED})")


def _rounded_share(x: np.ndarray) -> str:
    """How much fp16 and bf16 change real-valued inputs (computed on the data)."""
    from testbed.precision import to_bfloat16, to_float16
    parts = []
    for name, fn in (("fp16", to_float16), ("bf16", to_bfloat16)):
        stored = fn(x)
        nonzero = x != 0
        rel = np.abs(stored[nonzero] - x[nonzero]) / np.abs(x[nonzero])
        parts.append(f"{name} changes {100 * np.mean(stored != x):.0f}% of the values "
                     f"(largest relative error {rel.max():.2g})")
    return ("The 30 inputs are real-valued measurements: " + "; ".join(parts) + ".")


def _csv_columns(path: str, target: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    from testbed.io.read import read_csv

    rows = read_csv(path, source=path, required=(target,))
    if len(rows) < MIN_ROWS:
        raise InputError(f"has {len(rows)} data rows; the study needs at least {MIN_ROWS}",
                         source=path)
    features = [c for c in rows[0][1] if c != target]
    if not features:
        raise InputError(f"has no input columns besides the target {target!r}", source=path)
    x = np.array([[_number(row[c], source=path, line=line, column=c) for c in features]
                  for line, row in rows])
    y = np.array([_number(row[target], source=path, line=line, column=target)
                  for line, row in rows])
    return features, x, y


def csv_dataset(path: str, target: str) -> StudyData:
    """A CSV with a named target column (see the module docstring)."""
    features, x, y = _csv_columns(path, target)
    train, test = _shuffled_split(len(y))
    integer = bool(np.all(y == np.rint(y)))
    is_classes = integer and len(np.unique(y)) <= MAX_CLASSES
    split = f"shuffled {1 - TEST_FRACTION:.0%}/{TEST_FRACTION:.0%} (seed {SPLIT_SEED})"
    common = dict(name=Path(path).name, target=target, features=tuple(features),
                  x_train=x[train], x_test=x[test], y_test=y[test], split=split)
    if is_classes:
        values, idx = _classes(y[train])
        return StudyData(task="classification", y_train=idx.astype(np.int64),
                         no_skill=_most_frequent(idx, len(test), values),
                         class_values=values, **common)
    return StudyData(task="regression", y_train=y[train],
                     no_skill=NoSkill("the training mean",
                                      np.full(len(test), float(y[train].mean()))),
                     **common)
