"""Calibration from measurement records: fits, the fitted profile section, verification.

Pure core (numpy, scipy, pydantic, yaml): records in (:mod:`testbed.measurements`), a
system profile out (written through :mod:`testbed.files`). Modules:

* :mod:`~testbed.calibration.section` — the schema of the fitted section
  (``calibration.records_fit``) a calibrated profile carries;
* :mod:`~testbed.calibration.records` — reading record files (with their SHA-256),
  the machine check, and the ParaDL/ABCI CSV importer;
* :mod:`~testbed.calibration.compute`, :mod:`~testbed.calibration.network`,
  :mod:`~testbed.calibration.storage`, :mod:`~testbed.calibration.restart` — the fits;
* :mod:`~testbed.calibration.paradl` — the ABCI fit (``testbed.calibrate``) from records;
* :mod:`~testbed.calibration.fit` — orchestration: records + base profile → profile;
* :mod:`~testbed.calibration.profile` — loading and writing calibrated profiles;
* :mod:`~testbed.calibration.predict` — what a calibrated profile predicts per record;
* :mod:`~testbed.calibration.verify` — accuracy metrics and hold-out schemes;
* :mod:`~testbed.calibration.replay` — a supervised run's timeline as a simulator spec;
* :mod:`~testbed.calibration.design` — the designed calibration set.

This package's ``__init__`` imports nothing, so :mod:`testbed.systems` may import the
section schema without an import circle.
"""
