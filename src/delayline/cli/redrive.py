"""``delayline dead-letters redrive``: a consumer group's chosen dead letters back to its
retry topic for another attempt, once (:mod:`delayline.client.consumer.redrive`)."""

from __future__ import annotations

import argparse
import json

from delayline.cli._common import add_bootstrap, say
from delayline.client.consumer.redrive import Choice, redrive
from delayline.core.units import parse_instant_ms


def register(dead_letters: argparse.ArgumentParser) -> None:
    """Add ``redrive`` under ``dead-letters``."""
    actions = dead_letters.add_subparsers(dest="action", metavar="{redrive}")
    p = actions.add_parser(
        "redrive",
        help="send a consumer group's chosen dead letters back for another attempt, once",
        description="Read a retrying consumer's dead-letter topic (<group>-dlt: "
        "docs/retry.md) and write the chosen letters to their group's retry topic, each "
        "once: a letter redriven before is skipped. Choose by id, source topic, time or "
        "error (all given must hold).",
    )
    add_bootstrap(p)
    # The choice is this redrive's own, not a setting: no environment defaults.
    p.add_argument("--topic", help="the dead-letter topic, e.g. billing-dlt (required)")
    p.add_argument(
        "--id", dest="ids", help="dead-letter ids, <partition>/<offset>, comma-separated"
    )
    p.add_argument("--source-topic", help="only letters first read from this topic")
    p.add_argument("--since", type=parse_instant_ms,
                   help="only letters dead-lettered at or after this ISO 8601 time")  # fmt: skip
    p.add_argument("--until", type=parse_instant_ms,
                   help="only letters dead-lettered before this ISO 8601 time")  # fmt: skip
    p.add_argument("--error", help="only letters whose error class or message contains this")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be redriven, write nothing")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the outcome as one JSON object")
    p.set_defaults(func=_redrive)


def _redrive(args: argparse.Namespace) -> int:
    if not args.topic:
        raise SystemExit(
            "delayline dead-letters redrive: --topic (the dead-letter topic) is needed"
        )
    ids = frozenset(i.strip() for i in (args.ids or "").split(",") if i.strip())
    choice = Choice(ids, args.source_topic, args.since, args.until, args.error)
    outcome = redrive(args.bootstrap_servers, args.topic, choice, dry_run=args.dry_run)
    if args.json:
        say(json.dumps({"redriven": list(outcome.redriven), "already": list(outcome.already),
                        "dry_run": outcome.dry_run}))  # fmt: skip
        return 0
    verb = "would redrive" if outcome.dry_run else "redriven"
    say(f"{verb}: {len(outcome.redriven)} ({', '.join(outcome.redriven[:20])}"
        f"{' ...' if len(outcome.redriven) > 20 else ''})")  # fmt: skip
    if outcome.already:
        say(f"redriven before, skipped: {len(outcome.already)}")
    return 0
