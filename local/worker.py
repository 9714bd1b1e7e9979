"""`postbag worker`: the scheduled passes and the LISTEN wake-up, without HTTP.

The loop itself is production code, `core.ticks.worker`; this module is its command.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack

import uvloop

from core.http.metrics import serve_metrics
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


def _port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError("must be a port number, 1 to 65535")
    return int(value)


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`postbag worker [--ticks deliver,digest,retention] [--concurrency C] [--grace S]
    [--metrics-port P [--metrics-host H]]`."""
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
    worker.add_argument(
        "--metrics-port",
        type=_port,
        help="serve GET /metrics (Prometheus) on this port (default: not served)",
    )
    worker.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        help="the address /metrics listens on (default 0.0.0.0)",
    )


async def _work(services: Services, args: argparse.Namespace) -> None:
    async with AsyncExitStack() as stack:
        if args.metrics_port is not None:
            await stack.enter_async_context(
                serve_metrics(services, host=args.metrics_host, port=args.metrics_port)
            )
        await run_worker(
            services,
            name=worker_name("worker"),
            ticks=args.ticks,
            concurrency=args.concurrency,
            grace=args.grace,
        )


def main(args: argparse.Namespace) -> int:
    """Check the settings (a ConfigError names what is missing), then work until SIGTERM."""
    settings = production_settings()
    configure_logging(settings.log_level, readable=sys.stderr.isatty())
    services = Services.from_settings(settings, pool_max=min(settings.db_pool_max, POOL_MAX))
    uvloop.run(_work(services, args))
    return 0
