"""Entry point of the ``testbed`` command.

Every command module registers itself on :data:`cli`. Input errors (``InputError`` and
click's usage errors) print one line to stderr and exit with status 2, never a
traceback. Heavy modules (SimPy, frameworks) are imported lazily inside commands so
that ``testbed --help`` and the oracle stay fast.
"""

from __future__ import annotations

import importlib
import sys

import click

from testbed import __version__
from testbed.errors import InputError

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
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="testbed")
def cli() -> None:
    """Simulation-and-replay testbed, with fault injection, for DL training on HPC clusters."""


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"testbed.cli.{name}")
        module.register(cli)


def fail(message: str) -> None:
    """Print one error line and exit 2."""
    click.echo(f"testbed: error: {message}", err=True)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    _register_all()
    try:
        cli.main(args=argv, prog_name="testbed", standalone_mode=False)
    except InputError as exc:
        fail(exc.format())
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except click.UsageError as exc:
        fail(exc.format_message())
    except click.exceptions.Abort:
        fail("aborted")
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        fail(exc.format_message())
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
