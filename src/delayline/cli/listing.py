"""``delayline list``: pending schedules, from a running ``delayline api``."""

from __future__ import annotations

import argparse
import json

from delayline.cli._common import env_flag, say
from delayline.cli.extras import require_extras
from delayline.errors import ApiUnavailableError, ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``."""
    p = sub.add_parser(
        "list",
        help="list pending schedules (asks a running delayline api)",
        description="Pending schedules from the API's catalog, sorted by due time.",
    )
    env_flag(
        p,
        "--api-url",
        env="DELAYLINE_API_URL",
        default="http://127.0.0.1:8080",
        help="base URL of delayline api",
    )
    env_flag(
        p,
        "--token",
        env="DELAYLINE_API_TOKEN",
        default=None,
        help="bearer token, when the API closes reads",
    )
    p.add_argument("--id", help="only ids starting with this")
    p.add_argument("--contains", help="only ids containing this")
    p.add_argument("--target-topic", help="only schedules for this target topic")
    p.add_argument("--limit", type=int, default=100, help="at most this many (1-1000)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    require_extras("list", "api")
    import httpx  # noqa: PLC0415 - in the api extra, not in the client's install

    if args.id and args.contains:
        raise ConfigError("give --id or --contains, not both")
    params: dict[str, str | int] = {"limit": args.limit}
    if args.id or args.contains:
        params["id"] = args.id or args.contains
        params["id_match"] = "prefix" if args.id else "contains"
    if args.target_topic:
        params["target_topic"] = args.target_topic
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        response = httpx.get(
            f"{args.api_url.rstrip('/')}/schedules", params=params, headers=headers, timeout=10
        )
    except httpx.HTTPError as exc:
        raise ApiUnavailableError(f"delayline api at {args.api_url} did not answer: {exc}") from exc
    if response.status_code != 200:
        detail = response.json().get("detail", response.text) if response.content else ""
        raise ConfigError(f"delayline api answered {response.status_code}: {detail}")
    items = response.json()["items"]
    if args.json:
        for item in items:
            say(json.dumps(item))
        return 0
    say(f"{'id':<36} {'due (UTC)':<20} {'target topic':<24} target key")
    for item in items:
        due = item["due_at"][:19].replace("T", " ")
        say(f"{item['id']:<36} {due:<20} {item['target_topic']:<24} {item['target_key'] or ''}")
    say(f"{len(items)} pending" + (" (more: raise --limit)" if len(items) == args.limit else ""))
    return 0
