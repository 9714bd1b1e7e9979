"""`postbag worker`: the scheduled passes and the LISTEN wake-up, without HTTP.

The loop itself is production code, `core.ticks.worker`; this module is its command.
"""

from __future__ import annotations

import argparse
import sys

import uvloop

from core.platform.logs import configure_logging
from core.platform.services import Services
from core.platform.settings import production_settings
from core.ticks.registry import TICKS, worker_name
from core.ticks.worker import CONCURRENCY, GRACE_SECONDS, POOL_MAX, run_worker


def positive(value: str) -> int:
    """An argument that must be a whole number of at least 1."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError("must be a whole number of at least 1")
    return int(value)


def _tick_names(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    if not names or set(names) - set(TICKS):
        raise argparse.ArgumentTypeError(f"a comma-separated list of {', '.join(TICKS)}")
    return names


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`postbag worker [--ticks deliver,digest,retention] [--concurrency C] [--grace S]`."""
    worker = commands.add_parser("worker", help="run the ticks and the LISTEN wake-up (no HTTP)")
    worker.add_argument(
        "--ticks",
        type=_tick_names,
        default=tuple(TICKS),
        help=f"which ticks to run (default {','.join(TICKS)})",
    )
    worker.add_argument(
        "--concurrency",
        type=positive,
        default=CONCURRENCY,
        help=f"sends in flight at once (default {CONCURRENCY})",
    )
    worker.add_argument(
        "--grace",
        type=float,
        default=GRACE_SECONDS,
        help=f"seconds sends under way may take after SIGTERM (default {GRACE_SECONDS:g})",
    )


def main(args: argparse.Namespace) -> int:
    """Check the settings (a ConfigError names what is missing), then work until SIGTERM."""
    settings = production_settings()
    configure_logging(settings.log_level, readable=sys.stderr.isatty())
    services = Services.from_settings(settings, pool_max=min(settings.db_pool_max, POOL_MAX))
    uvloop.run(
        run_worker(
            services,
            name=worker_name("worker"),
            ticks=args.ticks,
            concurrency=args.concurrency,
            grace=args.grace,
        )
    )
    return 0
