"""``ApiClient``: what needs the catalog, through ``delayline api``: list schedules, and
cancel, pause and resume them one by one or by group.

The Kafka client (:class:`~delayline.client.Scheduler`) writes schedules without
knowing what is pending; pausing one needs its current version, and acting on a group
needs its members, which the API's catalog knows. Standard library only.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from delayline.core.http import request_json
from delayline.errors import DelaylineError


class ApiError(DelaylineError):
    """The API refused the request (``status``: its HTTP status; ``detail``: its reason).
    Retriable when the API says it is unavailable (503)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        self.retriable = status == 503
        super().__init__(f"delayline api answered {status}: {detail}")


class ApiClient:
    """Calls to a running ``delayline api``.

    Args:
        url: Its base URL, e.g. ``http://127.0.0.1:8080``.
        token: Its bearer token (writes need one).
        timeout_s: Bound on each call.

    Every method raises :class:`ApiError` on a refusal and
    :class:`~delayline.errors.HttpUnavailableError` (retriable) when nothing answers.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s

    def list(self, *, group: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Pending schedules (of ``group``), in due order, every page up to ``limit``."""
        found: list[dict[str, Any]] = []
        cursor = None
        while len(found) < limit:
            params: dict[str, str | int] = {"limit": min(1000, limit - len(found))}
            if group is not None:
                params["group"] = group
            if cursor is not None:
                params["cursor"] = cursor
            page = self._call("GET", "/schedules", params)
            found.extend(page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return found

    def get(self, schedule_id: str) -> dict[str, Any]:
        """One schedule: its pending version (with its next occurrences) and history."""
        return self._call("GET", f"/schedules/{_quote(schedule_id)}")

    def cancel(self, schedule_id: str) -> dict[str, Any]:
        """Cancel a schedule: the API writes the cancel whatever its catalog has read
        and answers once Kafka acknowledged it (``records``: where). An id the catalog
        has no pending version of (written a moment ago and not read yet, or delivered
        or cancelled already) is cancelled all the same, never a 404: the answer's
        ``note`` then says so."""
        return self._call("DELETE", f"/schedules/{_quote(schedule_id)}")

    def pause(self, schedule_id: str) -> dict[str, Any]:
        """Pause a pending schedule (one-off or recurring). The API decides once its
        catalog has read every schedule written before the call (a 404 means not
        pending; a 503, retriable, that the catalog could not get there in time)."""
        return self._call("POST", f"/schedules/{_quote(schedule_id)}/pause")

    def resume(self, schedule_id: str) -> dict[str, Any]:
        """Resume a paused schedule; what fell due meanwhile follows its catch-up policy.
        Decided as :meth:`pause` is, once the catalog has read the call's past."""
        return self._call("POST", f"/schedules/{_quote(schedule_id)}/resume")

    def cancel_group(self, group: str) -> dict[str, Any]:
        """Cancel every pending schedule of ``group``."""
        return self._call("DELETE", f"/groups/{_quote(group)}")

    def pause_group(self, group: str) -> dict[str, Any]:
        """Pause every pending schedule of ``group``."""
        return self._call("POST", f"/groups/{_quote(group)}/pause")

    def resume_group(self, group: str) -> dict[str, Any]:
        """Resume every paused schedule of ``group``."""
        return self._call("POST", f"/groups/{_quote(group)}/resume")

    def _call(
        self, method: str, path: str, params: dict[str, str | int] | None = None
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        status, body = request_json(
            method, self.url + path, params=params, headers=headers, timeout_s=self.timeout_s
        )
        if status >= 400:
            detail = body.get("detail") if isinstance(body, dict) else None
            raise ApiError(status, str(detail or "no detail"))
        if not isinstance(body, dict):
            raise ApiError(status, "the answer is not a JSON object")
        return body


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")
