"""``delayline pause`` and ``delayline resume``: a schedule, or a group, through the API."""

from __future__ import annotations

import argparse

from delayline.cli._common import WRITE_ACCESS_HELP, add_api, api_unavailable, say
from delayline.client.api import ApiClient, ApiError
from delayline.errors import ConfigError, HttpUnavailableError

ACTIONS = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pause`` and ``resume``."""
    descriptions = {
        "pause": "Pause a schedule (one-off or recurring), or every schedule of a --group: "
        "it waits, due nowhere, until resumed.",
        "resume": "Resume a paused schedule, or every paused schedule of a --group: due when "
        "it was; what fell due meanwhile follows its catch-up policy.",
    }
    for action, description in descriptions.items():
        p = sub.add_parser(
            action,
            help=f"{action} a schedule or a group (asks a running delayline api)",
            description=description,
        )
        p.add_argument("id", metavar="ID", nargs="?", help="schedule id")
        p.add_argument("--group", help=f"{action} every schedule of this group instead")
        add_api(p, WRITE_ACCESS_HELP)
        p.set_defaults(func=_act, action=action)


def _act(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.group is None):
        raise ConfigError("give a schedule ID or --group, not both")
    if args.group is not None:
        return act_on_group(args, args.action)
    client = ApiClient(args.api_url, args.token)
    call = client.pause if args.action == "pause" else client.resume
    written = _answer(args, lambda: call(args.id))
    place = f"{written['topic']}/{written['partition']}@{written['offset']}"
    warning = f": {written['warning']}" if written.get("warning") else ""
    say(f"{ACTIONS[args.action]} {args.id!r} ({place}){warning}")
    return 0


def act_on_group(args: argparse.Namespace, action: str) -> int:
    """Cancel, pause or resume every schedule of ``args.group`` through the API."""
    client = ApiClient(args.api_url, args.token)
    calls = {"cancel": client.cancel_group, "pause": client.pause_group,
             "resume": client.resume_group}  # fmt: skip
    done = _answer(args, lambda: calls[action](args.group))
    say(f"{ACTIONS[action]} {done['schedules']} schedule(s) of group {args.group!r}")
    return 0


def _answer(args: argparse.Namespace, call: object) -> dict[str, object]:
    try:
        answer = call()  # type: ignore[operator]
    except HttpUnavailableError as exc:
        raise api_unavailable(args.api_url, exc) from exc
    except ApiError as exc:
        hint = " (pass --token, env DELAYLINE_API_TOKEN)" if exc.status in (401, 403) else ""
        raise ConfigError(f"delayline api answered {exc.status}: {exc.detail}{hint}") from exc
    assert isinstance(answer, dict)
    return answer
