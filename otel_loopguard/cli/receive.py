"""``otel-loopguard receive``: its options; the receiver (Starlette, uvicorn, gRPC) is imported
only when it runs, so the core install keeps every other command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..config.loading import ConfigError
from ..services._base import (
    ENV_TOKEN,
    ServiceError,
    check_bounds,
    one_line,
    parse_listen,
    read_token,
)
from .serve import add_bounds, missing_extra, service_config

DEFAULT_LISTEN = "127.0.0.1:4318"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "receive",
        help="an OTLP receiver that detects loops in the spans it forwards (needs the "
        "receive extra)",
        description=(
            "Receive OTLP traces (HTTP: POST /v1/traces, protobuf or JSON; gRPC with --grpc), "
            "judge their tool calls as the span processor does, and forward every span, with "
            "the loop annotations added, to --export (an OTLP/HTTP endpoint), the loopguard.* "
            "metrics too. Listens on 127.0.0.1 unless told otherwise; beyond loopback it needs "
            f"a bearer token (--token-file or ${ENV_TOKEN})."
        ),
    )
    parser.add_argument("--config", metavar="FILE", help="a loop-detection config file")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_LISTEN,
        help=f"OTLP/HTTP (default {DEFAULT_LISTEN}; port 0: any free port)",
    )
    parser.add_argument(
        "--grpc", metavar="HOST:PORT", help="also OTLP/gRPC here (e.g. 127.0.0.1:4317)"
    )
    parser.add_argument(
        "--export",
        metavar="URL",
        required=True,
        help="the next hop's OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (/v1/traces and "
        "/v1/metrics are appended)",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"require this bearer token (its first line; default ${ENV_TOKEN})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=8 << 20,
        metavar="N",
        help="the largest request, after decompression (default 8 MiB)",
    )
    parser.add_argument(
        "--queue-size",
        type=int,
        default=64,
        metavar="N",
        help="requests held for the next hop at most; past it senders are told to retry "
        "(429 / RESOURCE_EXHAUSTED) (default 64)",
    )
    parser.add_argument(
        "--metric-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how often the loopguard.* metrics are exported (default 60)",
    )
    add_bounds(parser)
    parser.set_defaults(handler=_receive)


def _receive(args: argparse.Namespace) -> int:
    try:
        listen = parse_listen(args.listen)
        grpc = None if args.grpc is None else parse_listen(args.grpc)
        check_bounds(args)
        if args.max_body_bytes < 1024:
            raise ServiceError("--max-body-bytes must be at least 1024")
        if args.queue_size < 1:
            raise ServiceError("--queue-size must be at least 1")
        if not args.metric_interval > 0:
            raise ServiceError("--metric-interval must be a number of seconds > 0")
        token = read_token(args.token_file)
        try:
            import starlette  # noqa: F401  (the extra's: imported by receive() as it starts)
            import uvicorn  # noqa: F401

            from ..services.receive import receive
        except ImportError as missing:
            raise ServiceError(missing_extra("receive", missing.name)) from None
        receive(
            service_config(args.config),
            listen,
            args.export,
            grpc_listen=grpc,
            token=token,
            max_body_bytes=args.max_body_bytes,
            queue_size=args.queue_size,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            metric_interval_ms=args.metric_interval * 1000,
        )
    except (ServiceError, ConfigError) as exc:
        print(f"otel-loopguard receive: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
