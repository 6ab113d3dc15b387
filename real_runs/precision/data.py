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
count over the training years, rounded the same way.

**digits**: the 1797 8×8 handwritten digits bundled with scikit-learn (no download),
64 grey levels 0…16, ten classes; a fixed shuffled 75/25 split. No-skill forecast:
the most frequent training class.

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
DATASETS = ("hurricanes", "digits")

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
    rounded to a whole non-negative count before it is scored)."""

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

    @property
    def classes(self) -> int:
        return len(self.class_values)


def load_dataset(dataset: str, target: str | None = None) -> StudyData:
    """The data set called ``dataset`` (hurricanes, digits) or read from a CSV path."""
    if dataset == "hurricanes":
        return hurricanes(target or "hurricanes")
    if dataset == "digits":
        if target is not None:
            raise InputError("digits has a fixed target (the digit); drop --target",
                             field="--target")
        return digits()
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


def hurricanes(target: str = "hurricanes") -> StudyData:
    """The monthly hurricane-count forecast (see the module docstring)."""
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

    x_train, y_train, m_train = split(TRAIN_YEARS)
    x_test, y_test, m_test = split(TEST_YEARS)
    mean_by_month = {m: y_train[m_train == m].mean() for m in range(1, 13)}
    climatology = np.array([mean_by_month[m] for m in m_test])
    features = tuple(["month_sin", "month_cos", "nino12_sst_prev_c"]
                     + [f"{target}_lag{lag}" for lag in COUNT_LAGS])
    return StudyData(
        name="hurricanes", task="count", target=target, features=features,
        x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
        no_skill=NoSkill(f"climatology: the month's mean count over {TRAIN_YEARS[0]}–"
                         f"{TRAIN_YEARS[1]}, rounded", climatology),
        split=f"train {TRAIN_YEARS[0]}–{TRAIN_YEARS[1]}, test {TEST_YEARS[0]}–{TEST_YEARS[1]}")


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
    return StudyData(
        name="digits", task="classification", target="digit",
        features=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
        x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test].astype(np.float64),
        no_skill=_most_frequent(y[train], len(test), classes),
        class_values=classes,
        split=f"shuffled {1 - TEST_FRACTION:.0%}/{TEST_FRACTION:.0%} (seed {SPLIT_SEED})")


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
