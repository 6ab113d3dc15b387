"""Entry point of the ``testbed`` command.

Commands are found by name in :data:`COMMANDS` and their module is imported only when
that command runs (:class:`LazyGroup`), so ``testbed simulate`` pays for the simulator's
imports and not for the HPO driver's, the plots' or the frameworks'. Input errors
(``InputError`` and click's usage errors) print one line to stderr and exit with status
2, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import MutableMapping

import click

from testbed import __version__
from testbed.errors import InputError, TestbedError

#: Command name → (module under testbed/app/cli/, the click command in it).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run_cmd"),
    "scenarios": ("scenarios", "scenarios_cmd"),
    "simulate": ("simulate", "simulate_cmd"),
    "sweep": ("sweep", "sweep_cmd"),
    "report": ("report", "report_cmd"),
    "results": ("results", "results_group"),
    "oracle": ("oracle", "oracle"),
    "model": ("model", "model_group"),
    "traces": ("traces", "traces"),
    "hpo": ("hpo", "hpo_group"),
    "precision-study": ("precision", "precision_study_cmd"),
    "study": ("study", "study_group"),
    "real-run": ("realrun", "real_run"),
    "records": ("records", "records_group"),
    "calibrate": ("calibrate", "calibrate_cmd"),
    "calibrate-local": ("calibrate_local", "calibrate_local_cmd"),
    "verify": ("verify", "verify_cmd"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are asked for (see the module
    docstring); ``testbed --help`` imports them all to show their one-line help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"testbed.app.cli.{module}"), attr)
        self.add_command(command, cmd_name)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="testbed")
@click.option("--max-input-size", metavar="SIZE",
              help="Largest input file read (default 64MiB; e.g. 1GiB).")
@click.option("--allow-code", is_flag=True,
              help="Let a scenario's cluster.host_selection: 'module:function' import that "
                   "Python policy (without it, no input file runs code).")
def cli(max_input_size: str | None, allow_code: bool) -> None:
    """Simulation-and-replay testbed, with fault injection, for DL training on HPC clusters."""
    if allow_code:
        from testbed.resilience.policies import ALLOW_CODE_ENV
        os.environ[ALLOW_CODE_ENV] = "1"
    if max_input_size is not None:
        from testbed.io.read import LIMIT_ENV  # the reader (and YAML) only when asked
        from testbed.units import parse_size_bytes
        size = parse_size_bytes(max_input_size, source="--max-input-size")
        if size <= 0:
            raise InputError("must be a size > 0", source="--max-input-size")
        os.environ[LIMIT_ENV] = str(size)


def fail(message: str) -> None:
    """Print one error line and exit 2."""
    click.echo(f"testbed: error: {message}", err=True)
    sys.exit(2)


def _sigterm(_signum, _frame) -> None:
    raise KeyboardInterrupt


#: What OpenBLAS (numpy's BLAS) reads its thread count from, first found wins.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread(environ: MutableMapping[str, str] = os.environ) -> None:
    """Run numpy's BLAS on one thread unless the user chose a count.

    OpenBLAS starts its threads, and allocates a buffer for each, when numpy is first
    imported. The commands' arrays are small (random draws, fits of a few dozen rows,
    permutation tests), where a second thread gains nothing, and starting it cost about
    85 ms of CPU on every command: ``import numpy`` measured 0.20 s of CPU here with the
    default two threads and 0.11 s with one (best of 15, 2026-12-03). The harness
    children already run one thread (:func:`real_runs.env.child_env`); a count set in
    the environment (a Slurm job's ``OMP_NUM_THREADS``) is kept.
    """
    if not any(name in environ for name in BLAS_THREAD_VARS):
        environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv: list[str] | None = None) -> None:
    one_blas_thread()                         # before any command imports numpy
    signal.signal(signal.SIGTERM, _sigterm)   # `kill` and Slurm stop a command like Ctrl-C
    try:
        cli.main(args=argv, prog_name="testbed", standalone_mode=False)
    except InputError as exc:
        fail(exc.format())
    except ImportError as exc:     # a framework of the optional extra is not installed
        from testbed.app.cli.common import FRAMEWORKS_EXTRA, missing_framework
        module = missing_framework(exc)
        if module is None:
            raise
        fail(f"{FRAMEWORKS_EXTRA} ({module} is not installed)")
    except TestbedError as exc:   # a failure that is not the input's fault: one line, exit 1
        click.echo(f"testbed: failed: {exc}", err=True)
        sys.exit(1)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except click.UsageError as exc:
        fail(exc.format_message())
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("testbed: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        fail(exc.format_message())
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
