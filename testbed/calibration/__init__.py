"""Calibration from measurement records: fits, the fitted profile section, verification.

Pure core (numpy, scipy, pydantic, yaml): records in (:mod:`testbed.measurements`), a
system profile out (written through :mod:`testbed.io.write`). Modules:

* :mod:`~testbed.systems.calibrated` — the schema of the fitted section
  (``calibration.records_fit``) a calibrated profile carries;
* :mod:`~testbed.calibration.records` — reading record files (with their SHA-256),
  the machine check, and the ParaDL/ABCI CSV importer;
* :mod:`~testbed.calibration.plausible` — the physical range of measured values
  (garbage is refused naming file, line and key);
* :mod:`~testbed.calibration.compute`, :mod:`~testbed.calibration.network`,
  :mod:`~testbed.calibration.storage`, :mod:`~testbed.calibration.restart` — the fits;
* :mod:`~testbed.calibration.dataparallel` — data-parallel ranks sharing one host's
  cores: time slicing, the harness's loss all-reduce, the wait for a core (fitted once
  the compute and network fits are in the profile);
* :mod:`~testbed.calibration.abci` — the ABCI/ParaDL fit (the one implementation);
* :mod:`~testbed.calibration.paradl` — that fit from records (``testbed calibrate CSV``
  imports the CSV as records and runs it, :mod:`testbed.calibration.abci_csv`);
* :mod:`~testbed.calibration.fit` — orchestration: records + base profile → profile;
* :mod:`~testbed.calibration.profile` — loading and writing calibrated profiles;
* :mod:`~testbed.calibration.predict` — what a calibrated profile predicts per record
  (training steps and ParaDL iterations through the oracle, which reads the fitted
  section: :mod:`testbed.oracle.fitted`);
* :mod:`~testbed.calibration.verify` — accuracy metrics and hold-out schemes;
* :mod:`~testbed.calibration.replay` — a supervised run's timeline as a simulator spec;
* :mod:`~testbed.calibration.design` — the designed calibration set.

This package's ``__init__`` imports nothing, so :mod:`testbed.systems.profile` may import the
section schema (``Calibration.records_fit``) without an import circle.
"""
