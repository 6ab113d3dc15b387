"""The communication stack a measurement ran on: library versions and the settings
that change collective performance (NCCL, UCX, Open MPI, libfabric), for the
``versions`` map of every record's environment (:func:`real_runs.env.capture_environment`).

What is recorded, and why:

* ``mpi``: the MPI library's own version line (``MPI_Get_library_version``), when
  mpi4py is already imported in this process (an MPI rank); ``nccl``, ``cuda`` and
  ``cudnn`` from PyTorch when it is imported and sees a GPU — the libraries actually
  loaded, not whatever is on ``PATH``.
* ``TESTBED_VERSION_<NAME>`` variables, set once by the sbatch job at its start
  (``scontrol --version``, ``mpirun --version``, ``ucx_info -v``), as ``<name>``: the
  tools of the cluster the job ran on, without a subprocess per record.
* ``env:<VAR>``: every variable of the prefixes in :data:`SETTING_PREFIXES` (what a
  site or a user sets: ``NCCL_IB_HCA``, ``UCX_TLS``, ``OMPI_MCA_btl``…), except those
  an MPI launcher sets in each rank's environment at launch (:data:`LAUNCH_INTERNAL`:
  ports, job ids, session folders — noise that differs from run to run).

Nothing here imports a framework or starts a process: it reads ``sys.modules`` and
``os.environ`` only, so capturing an environment stays cheap.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: Variables that tune the communication stack (NCCL, UCX, Open MPI and PMIx MCA
#: parameters, Intel MPI, MPICH, libfabric, gloo/TensorPipe interface choice).
SETTING_PREFIXES = ("NCCL_", "TORCH_NCCL_", "UCX_", "OMPI_MCA_", "PMIX_MCA_", "I_MPI_",
                    "MPICH_", "FI_", "GLOO_", "TP_SOCKET_IFNAME")
#: What Open MPI's launcher writes into every rank's environment (not a setting).
LAUNCH_INTERNAL = ("OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
                   "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "OMPI_MCA_mpi_oversubscribe",
                   "PMIX_MCA_mca_base_component_show_load_errors")
#: The job's one-time version lines: ``TESTBED_VERSION_SLURM=...`` → ``slurm``.
VERSION_PREFIX = "TESTBED_VERSION_"
#: Longest value kept (a record's text fields are single lines of bounded length).
MAX_VALUE_CHARS = 200


def _line(text: str) -> str:
    """The first line of ``text``, without control characters, of bounded length."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return "".join(ch for ch in first if ch == "\t" or 32 <= ord(ch) != 127)[:MAX_VALUE_CHARS]


def settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The communication settings in ``environ`` (default: this process's), as
    ``env:NAME`` → value."""
    environ = os.environ if environ is None else environ
    return {f"env:{key}": _line(value) for key, value in sorted(environ.items())
            if key.startswith(SETTING_PREFIXES) and not key.startswith(LAUNCH_INTERNAL)}


def job_versions(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The versions the job recorded at its start (``TESTBED_VERSION_*``)."""
    environ = os.environ if environ is None else environ
    return {key[len(VERSION_PREFIX):].lower(): _line(value)
            for key, value in sorted(environ.items())
            if key.startswith(VERSION_PREFIX) and len(key) > len(VERSION_PREFIX)
            and _line(value)}


def loaded_versions() -> dict[str, str]:
    """Versions of the communication libraries loaded in this process (never imports)."""
    out: dict[str, str] = {}
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            out["mpi"] = _line(mpi.Get_library_version())
        except Exception:           # an MPI that cannot say (not initialised): say nothing
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        out["cuda"] = str(torch.version.cuda)
        if torch.backends.cudnn.is_available():
            out["cudnn"] = str(torch.backends.cudnn.version())
    return out


def stack_versions() -> dict[str, str]:
    """Everything above, for an environment's ``versions`` map."""
    return {**job_versions(), **settings(), **loaded_versions()}
