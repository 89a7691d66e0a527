"""``delayline list``, ``show`` and ``dead-letters``: what a running ``delayline api``
knows (pending schedules, one schedule with its versions, dead letters)."""

from __future__ import annotations

import argparse
import json
import urllib.parse
from datetime import datetime
from typing import Any

from delayline.cli import redrive
from delayline.cli._common import (
    NotFoundError,
    add_api,
    api_get,
    api_refused,
    say,
)
from delayline.contract.contracts import CONTRACTS
from delayline.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``, ``show`` and ``dead-letters``."""
    p = sub.add_parser(
        "list",
        help="list pending schedules (asks a running delayline api)",
        description="Pending schedules from the API's catalog, sorted by due time.",
    )
    add_api(p)
    p.add_argument("--id", help="only ids starting with this")
    p.add_argument("--contains", help="only ids containing this")
    p.add_argument("--target-topic", help="only schedules for this target topic")
    p.add_argument("--group", help="only schedules of this group")
    p.add_argument(
        "--contract",
        choices=CONTRACTS,
        help="only those that came in by this contract (see docs/contracts.md)",
    )
    p.add_argument("--limit", type=int, default=100, help="at most this many (1-1000)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_list)
    _register_show(sub)
    _register_dead_letters(sub)


def _register_show(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "show",
        help="one schedule with its versions (asks a running delayline api)",
        description="A schedule id from the API's catalog: the pending version (due time, "
        "target, payload, headers) and every version seen (created, updated, cancelled, "
        "fired with its lateness, dead-lettered with its reason).",
    )
    p.add_argument("id", metavar="ID", help="schedule id")
    add_api(p)
    p.add_argument("--json", action="store_true", help="the API's answer as one JSON object")
    p.set_defaults(func=_show)


def _register_dead_letters(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dead-letters",
        help="rejected and expired records (asks a running delayline api)",
        description="Dead letters from the API's catalog, newest first, with their reasons.",
    )
    add_api(p)
    p.add_argument("--reason", help="only those whose reason contains this")
    p.add_argument("--limit", type=int, default=100, help="at most this many (1-1000)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_dead_letters)
    redrive.register(p)


def _list(args: argparse.Namespace) -> int:
    if args.id and args.contains:
        raise ConfigError("give --id or --contains, not both")
    params: dict[str, str | int] = {"limit": args.limit}
    if args.id or args.contains:
        params["id"] = args.id or args.contains
        params["id_match"] = "prefix" if args.id else "contains"
    if args.target_topic:
        params["target_topic"] = args.target_topic
    if args.contract:
        params["contract"] = args.contract
    if args.group:
        params["group"] = args.group
    status, body = api_get(args, "/schedules", params)
    if status != 200 or not isinstance(body, dict):
        raise api_refused(status, body)
    items = body["items"]
    if args.json:
        for item in items:
            say(json.dumps(item))
        return 0
    say(f"{'id':<36} {'due (UTC)':<20} {'contract':<14} {'target topic':<24} target key")
    for item in items:
        due = item["due_at"][:19].replace("T", " ")
        contract = item.get("contract", "header")  # an API older than the contracts
        say(f"{item['id']:<36} {due:<20} {contract:<14} {item['target_topic']:<24} "
            f"{item['target_key'] or ''}{_notes(item)}")  # fmt: skip
    say(f"{len(items)} pending" + (" (more: raise --limit)" if len(items) == args.limit else ""))
    return 0


def _notes(item: dict[str, object]) -> str:
    """A list line's tail: paused, how it recurs, its group."""
    notes = ["PAUSED"] if item.get("paused") else []
    notes += [str(item[k]) for k in ("recurrence",) if item.get(k)]
    notes += [f"group {item['group']}"] if item.get("group") else []
    return ("  [" + "; ".join(notes) + "]") if notes else ""


def _show(args: argparse.Namespace) -> int:
    status, body = api_get(args, "/schedules/" + urllib.parse.quote(args.id, safe=""))
    if status == 404:
        raise NotFoundError(
            f"no schedule with id {args.id!r} (never written, or its history was pruned)"
        )
    if status != 200 or not isinstance(body, dict):
        raise api_refused(status, body)
    if args.json:
        say(json.dumps(body))
        return 0
    for line in show_lines(body):
        say(line)
    return 0


def _dead_letters(args: argparse.Namespace) -> int:
    params: dict[str, str | int] = {"limit": args.limit}
    if args.reason:
        params["reason"] = args.reason
    status, body = api_get(args, "/dead-letters", params)
    if status != 200 or not isinstance(body, dict):
        raise api_refused(status, body)
    items = body["items"]
    if args.json:
        for item in items:
            say(json.dumps(item))
        return 0
    for line in dead_letter_lines(items, more=body.get("next_cursor") is not None):
        say(line)
    return 0


PAYLOAD_SHOWN = 200
"""Characters of a payload shown by ``show``; ``--json`` has all of it."""


def show_lines(detail: dict[str, Any]) -> list[str]:
    """``delayline show`` for people: the pending version, then every version seen.

    Args:
        detail: The API's answer to ``GET /schedules/{id}``.
    """
    versions = detail.get("versions") or []
    current = detail.get("current")
    if current is None:
        last = versions[-1]["kind"] if versions else "unknown"
        lines = [f"{detail['id']}: not pending (last: {last})"]
    else:
        lines = [f"{detail['id']}: pending", *_current_lines(current)]
    lines.append(f"versions ({len(versions)}, oldest first):")
    lines.extend(f"  {_version_line(v)}" for v in versions)
    return lines


def _current_lines(c: dict[str, Any]) -> list[str]:
    key = _shown_text(c["target_key"], c["target_key_base64"])
    payload = _shown_text(c["payload_text"], c["payload_base64"], PAYLOAD_SHOWN)
    contract = c.get("contract", "header")
    lines = [
        f"  due        {when(c['due_at'])} UTC",
        f"  target     {c['target_topic']}, key {key}",
        f"  stored at  {c['topic']}/{c['partition']}@{c['offset']} ({contract} contract)",
        f"  payload    {payload} ({c['payload_size']} bytes)",
    ]
    user = [h for h in c.get("headers", []) if not h["name"].startswith("scheduler-")]
    lines.extend(f"  header     {h['name']}: {_header_value(h)}" for h in user)
    return lines


def _version_line(v: dict[str, Any]) -> str:
    parts = [when(v["at"]), f"{v['kind']:<13}", f"{v['topic']}/{v['partition']}@{v['offset']}"]
    if v.get("due_at"):
        parts.append(f"due {when(v['due_at'])}")
    if v.get("target_topic"):
        parts.append(f"-> {v['target_topic']}")
    if v.get("lateness_ms") is not None:
        parts.append(f"lateness {v['lateness_ms']} ms")
    if v.get("reason"):
        parts.append(f"reason: {v['reason']}")
    return "  ".join(parts)


def dead_letter_lines(items: list[dict[str, Any]], *, more: bool) -> list[str]:
    """``delayline dead-letters`` for people: one line each, newest first.

    Args:
        items: The API's dead letters (``GET /dead-letters``).
        more: Whether the API has more than it sent.
    """
    lines = [f"{'at (UTC)':<23}  {'schedule id':<24}  {'source':<28}  reason"]
    for d in items:
        sid = d["schedule_id"] if d["schedule_id"] is not None else "(no id)"
        lines.append(f"{when(d['at']):<23}  {sid:<24}  {d['source']:<28}  {d['reason']}")
    lines.append(f"{len(items)} dead letter(s)" + (" (more: raise --limit)" if more else ""))
    return lines


def when(iso: str) -> str:
    """An API time (ISO 8601, UTC) as ``2030-01-01 17:00:00.250``."""
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _shown_text(text: str | None, b64: str | None, limit: int | None = None) -> str:
    if text is None and b64 is None:
        return "(null)"
    if text is None:
        return f"base64:{b64}"
    quoted = json.dumps(text, ensure_ascii=False)  # quotes, and escapes line breaks
    if limit is not None and len(quoted) > limit:
        return quoted[:limit] + "..."
    return quoted


def _header_value(h: dict[str, Any]) -> str:
    if h["value"] is None:
        return "(null)"
    return h["value"] if h["encoding"] == "utf-8" else f"base64:{h['value']}"
