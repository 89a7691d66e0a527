"""A retrying consumer group's dead letters (docs/retry.md): list them, redrive them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from delayline.api.auth import require_read, require_write
from delayline.api.routes.schedules import ERRORS
from delayline.api.schemas import HeaderOut, b64, headers_out, text_or_none, utc
from delayline.api.state import api_state
from delayline.catalog import MAX_PAGE
from delayline.client.consumer.redrive import Choice, dead_letters, letter_id, redrive
from delayline.client.retry import (
    ATTEMPT,
    DEAD_REASON,
    ERROR_CLASS,
    ERROR_MESSAGE,
    GROUP,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    header_value,
)
from delayline.contract import ConsumedRecord
from delayline.core.clock import datetime_to_ms
from delayline.errors import NoSuchTopicError

router = APIRouter(tags=["retries"])

Topic = Annotated[
    str,
    Query(
        min_length=1,
        max_length=249,
        description="A watched group's dead-letter topic (<group>-dlt).",
    ),
]


class RetryDeadLetterOut(BaseModel):
    """A record a retrying consumer gave up on."""

    id: str = Field(description="<partition>/<offset> in the dead-letter topic.")
    at: datetime
    group: str | None
    reason: str | None = Field(description="exhausted, not-retryable or unschedulable.")
    retries: int | None
    error_class: str | None
    error_message: str | None
    source: str | None = Field(description="<topic>/<partition>/<offset> first read from.")
    redriven: bool
    key_text: str | None
    payload_base64: str | None
    payload_text: str | None
    headers: list[HeaderOut]


class RetryDeadLetterPage(BaseModel):
    """Dead letters, newest first."""

    items: list[RetryDeadLetterOut]


class SourceCounts(BaseModel):
    """A group's retries and dead letters of records first read from one topic."""

    source_topic: str
    retries: int
    dead_letters: dict[str, int] = Field(description="By reason.")


class GroupRetriesOut(BaseModel):
    """A retrying consumer group the API watches (``--retry-groups``)."""

    group: str
    retry_topic: str
    dead_letter_topic: str
    sources: list[SourceCounts]


class RetriesOut(BaseModel):
    """The watched groups, in the order configured."""

    groups: list[GroupRetriesOut]


class RedriveIn(BaseModel):
    """Which dead letters to send back: all that are given must hold."""

    topic: str = Field(min_length=1, max_length=249)
    ids: list[str] = Field(default_factory=list, max_length=10_000)
    source_topic: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    error: str | None = Field(default=None, max_length=1024)
    dry_run: bool = False


class RedriveOut(BaseModel):
    """What a redrive did."""

    redriven: list[str]
    already: list[str]
    dry_run: bool


@router.get(
    "/retries",
    response_model=RetriesOut,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    summary="Retrying consumer groups: retries and dead letters by source topic",
)
def list_retry_groups(request: Request) -> RetriesOut:
    """Counted from each group's retry and dead-letter topics, from their beginnings (as
    far back as their retention keeps)."""
    watch = api_state(request).retries
    groups = [] if watch is None else watch.snapshot()
    out = []
    for g in groups:
        sources = sorted(set(g.retries) | {s for s, _ in g.dead_letters})
        counts = [
            SourceCounts(
                source_topic=s,
                retries=g.retries.get(s, 0),
                dead_letters={r: n for (t, r), n in sorted(g.dead_letters.items()) if t == s},
            )
            for s in sources
        ]
        topics = {"retry_topic": g.retry_topic, "dead_letter_topic": g.dead_letter_topic}
        out.append(GroupRetriesOut(group=g.group, sources=counts, **topics))
    return RetriesOut(groups=out)


@router.get(
    "/retries/dead-letters",
    response_model=RetryDeadLetterPage,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    summary="A retrying consumer group's dead letters",
)
async def list_retry_dead_letters(
    request: Request, topic: Topic, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100
) -> RetryDeadLetterPage:
    """The newest ``limit`` letters of the dead-letter topic (read whole from Kafka),
    each with whether it was redriven."""
    bootstrap = _watched(request, topic)
    letters = await run_in_threadpool(dead_letters, bootstrap, topic)
    newest = letters[::-1][:limit]
    return RetryDeadLetterPage(items=[_out(letter, done) for letter, done in newest])


@router.post(
    "/retries/dead-letters/redrive",
    response_model=RedriveOut,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Send chosen dead letters back for another attempt, once",
)
async def redrive_dead_letters(request: Request, body: RedriveIn) -> RedriveOut:
    """Write the chosen letters to their group's retry topic; a letter redriven before
    is skipped (``already``)."""
    choice = Choice(
        frozenset(body.ids),
        body.source_topic,
        None if body.since is None else datetime_to_ms(body.since),
        None if body.until is None else datetime_to_ms(body.until),
        body.error,
    )
    bootstrap = _watched(request, body.topic)
    done = await run_in_threadpool(
        lambda: redrive(bootstrap, body.topic, choice, dry_run=body.dry_run)
    )
    return RedriveOut(
        redriven=list(done.redriven), already=list(done.already), dry_run=done.dry_run
    )


def _watched(request: Request, topic: str) -> str:
    """The bootstrap servers, once ``topic`` is a watched group's dead-letter topic: the
    API reads no other topic for a request.

    Raises:
        NoSuchTopicError: it is not (404).
    """
    config = api_state(request).config
    if topic not in {f"{g}-dlt" for g in config.retry_groups}:
        raise NoSuchTopicError(
            f"{topic!r} is not the dead-letter topic of a group this API watches "
            "(delayline api --retry-groups)"
        )
    return config.topology.bootstrap_servers


def _out(letter: ConsumedRecord, redriven: bool) -> RetryDeadLetterOut:
    headers = letter.headers

    def text(name: str) -> str | None:
        value = header_value(headers, name)
        return None if value is None else value.decode("utf-8", "replace")

    retries = text(ATTEMPT)
    source = [text(n) for n in (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET)]
    return RetryDeadLetterOut(
        id=letter_id(letter),
        at=utc(letter.timestamp_ms),
        group=text(GROUP),
        reason=text(DEAD_REASON),
        retries=int(retries) if retries and retries.isdigit() else None,
        error_class=text(ERROR_CLASS),
        error_message=text(ERROR_MESSAGE),
        source="/".join(s for s in source if s) if source[0] else None,
        redriven=redriven,
        key_text=text_or_none(letter.key),
        payload_base64=b64(letter.value),
        payload_text=text_or_none(letter.value),
        headers=headers_out(headers),
    )
