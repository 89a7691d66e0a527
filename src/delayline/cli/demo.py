"""``delayline demo``: see delayline work on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from delayline.cli._common import env_bool, env_flag, say
from delayline.dev.demo import DemoConfig, default_demo_dir, run_demo
from delayline.infra.broker import BrokerConfig


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    parser = sub.add_parser(
        "demo",
        help="see delayline work: local broker, pipeline, 50 schedules delivered live",
        description="Start (or reuse) the local broker, start the pipeline, schedule about 50 "
        "messages (some updated, some cancelled, one malformed), show each delivery with its "
        "lateness, then stop what was started. Exit 1 if any expectation failed.",
    )
    env_flag(
        parser,
        "--port",
        env="DELAYLINE_BROKER_PORT",
        default=9092,
        type=int,
        help="client port of the local broker",
    )
    env_flag(
        parser,
        "--data-dir",
        env="DELAYLINE_BROKER_DATA_DIR",
        default=str(default_demo_dir()),
        type=Path,
        help="data directory of the local broker",
    )
    parser.add_argument(
        "--keep-broker",
        action="store_true",
        default=env_bool("DELAYLINE_DEMO_KEEP_BROKER"),
        help="leave the broker running if the demo started it [env DELAYLINE_DEMO_KEEP_BROKER=1]",
    )
    env_flag(
        parser,
        "--api-port",
        env="DELAYLINE_DEMO_API_PORT",
        default=8080,
        type=int,
        help="port of the REST API and admin page (another is picked if taken)",
    )
    parser.add_argument(
        "--hold",
        action=argparse.BooleanOptionalAction,
        default=env_bool("DELAYLINE_DEMO_HOLD", default=sys.stdin.isatty()),
        help="keep the pipeline and the admin page running after the demo until Ctrl-C "
        "[env DELAYLINE_DEMO_HOLD=1 or 0; default: when run from a terminal]",
    )
    parser.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    config = DemoConfig(
        broker=BrokerConfig(data_dir=args.data_dir, port=args.port),
        keep_broker=args.keep_broker,
        api_port=args.api_port,
        hold=args.hold,
    )
    return 0 if run_demo(config, say) else 1
