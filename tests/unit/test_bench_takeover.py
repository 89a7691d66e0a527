"""The take-over scenario's figures, from deliveries made up for the purpose."""

from __future__ import annotations

from delayline.bench.takeover import Seen, takeover_figures, takeover_table
from delayline.fire.inflight import inflight_partition

PARTITIONS = 4
KILLED_MS = 10_000
TAKEN_MS = 16_000


def ids_of(partition: int, count: int, prefix: str) -> list[str]:
    """``count`` schedule ids whose in-flight partition is ``partition``."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        sid = f"{prefix}-{n}"
        if inflight_partition(sid, PARTITIONS) == partition:
            found.append(sid)
        n += 1
    return found


def test_the_backlog_ends_with_its_last_arrival_and_windows_split_by_owner() -> None:
    due: dict[str, int] = {}
    seen: list[Seen] = []

    def deliver(sid: str, due_ms: int, arrival_ms: int) -> None:
        due[sid] = due_ms
        seen.append(Seen(sid, arrival_ms, max(due_ms, arrival_ms - 2)))

    # Before the kill: both on time (5 and 7 ms late).
    for sid in ids_of(0, 3, "own-early"):
        deliver(sid, 5_000, 5_005)
    for sid in ids_of(1, 3, "dead-early"):
        deliver(sid, 5_000, 5_007)
    # Due while nobody owned partition 1: delivered after the take-over, the last 300 ms on.
    for k, sid in enumerate(ids_of(1, 4, "backlog")):
        deliver(sid, 12_000 + k, TAKEN_MS + 100 * (k + 1) - 100 * (k == 0))
    # Due after the take-over and after the catch-up.
    for k, sid in enumerate(ids_of(1, 10, "taken")):
        deliver(sid, 17_000 + k, 17_000 + k + (40 if k == 9 else 4))
    for sid in ids_of(0, 10, "own-late"):
        deliver(sid, 17_000, 17_003)
    lost = ids_of(2, 1, "lost")[0]
    due[lost] = 18_000
    seen.append(seen[-1])  # delivered twice
    figures = takeover_figures(
        seen, due, [1, 3], PARTITIONS, killed_ms=KILLED_MS, taken_ms=TAKEN_MS
    )
    assert figures["handed_over"] == len(due)
    assert (figures["lost"], figures["duplicated"], figures["early"]) == (1, 1, 0)
    assert figures["kill_to_takeover_ms"] == 6_000
    assert figures["backlog"] == 4
    assert figures["backlog_delivered_after_takeover_ms"] == 400
    late = figures["lateness_ms"]
    assert late["before_kill"]["survivor"]["count"] == 3
    assert late["before_kill"]["survivor"]["p99"] == 5
    assert late["before_kill"]["victim"]["max"] == 7
    assert late["after_catch_up"]["victim"]["count"] == 10
    assert late["after_catch_up"]["victim"]["p50"] == 4
    assert late["after_catch_up"]["victim"]["max"] == 40
    # From the take-over on the backlog is not counted (due before), the later ones are.
    assert late["after_takeover"]["victim"]["count"] == 10
    assert late["after_catch_up"]["survivor"] == late["after_takeover"]["survivor"]
    assert late["after_catch_up"]["survivor"]["count"] == 10  # the duplicate counted once
    assert "400 ms after the take-over" in takeover_table(figures)


def test_an_early_delivery_is_counted_by_its_arrival_or_its_timestamp() -> None:
    sid = ids_of(0, 1, "x")[0]
    due = {sid: 10_000}
    early = takeover_figures(
        [Seen(sid, 10_050, 9_999)], due, [1], PARTITIONS, killed_ms=0, taken_ms=None
    )
    assert early["early"] == 1
    assert early["kill_to_takeover_ms"] is None
    assert "lateness_ms" not in early
    assert "None ms after the SIGKILL" in takeover_table(early)
