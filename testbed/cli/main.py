"""Entry point of the ``testbed`` command.

Every command module registers itself on :data:`cli`. Input errors (``InputError`` and
click's usage errors) print one line to stderr and exit with status 2, never a
traceback. Heavy modules (SimPy, frameworks) are imported lazily inside commands so
that ``testbed --help`` and the oracle stay fast.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

import click

from testbed import __version__
from testbed.errors import InputError, TestbedError
from testbed.inputs import LIMIT_ENV

# Command modules under testbed/cli/; each defines ``register(cli)``.
COMMAND_MODULES = (
    "oracle",
    "model",
    "run",
    "simulate",
    "calibrate",
    "realrun",
    "traces",
    "sweep",
    "results",
    "report",
    "hpo",
    "precision",
    "records",
    "verify",
    "calibrate_local",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
        from testbed.units import parse_size_bytes
        size = parse_size_bytes(max_input_size, source="--max-input-size")
        if size <= 0:
            raise InputError("must be a size > 0", source="--max-input-size")
        os.environ[LIMIT_ENV] = str(size)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"testbed.cli.{name}")
        module.register(cli)


def fail(message: str) -> None:
    """Print one error line and exit 2."""
    click.echo(f"testbed: error: {message}", err=True)
    sys.exit(2)


def _sigterm(_signum, _frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    _register_all()
    signal.signal(signal.SIGTERM, _sigterm)   # `kill` and Slurm stop a command like Ctrl-C
    try:
        cli.main(args=argv, prog_name="testbed", standalone_mode=False)
    except InputError as exc:
        fail(exc.format())
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
