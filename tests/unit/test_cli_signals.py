"""The stop event of ``delayline run``: a signal handler that cannot deadlock."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from delayline.cli._common import stop_on_signals


@pytest.fixture
def restore_handlers() -> object:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("restore_handlers")
def test_a_signal_inside_the_events_own_set_does_not_deadlock() -> None:
    """Two signals back to back: the second handler runs while the first one's
    ``Event.set`` holds the event's lock in the same thread (seen when a Ctrl-C reached
    both ``timeout`` and the pipeline). The handler must return, and the event be set
    once the lock is free."""
    stop = stop_on_signals(logging.getLogger(__name__), "testing")
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler)
    returned = threading.Event()

    def interrupted_inside_set() -> None:
        with stop._cond:  # type: ignore[attr-defined] # where the first handler was cut off
            handler(signal.SIGTERM, None)
            returned.set()

    # A thread stands in for the interrupted main thread: if the handler waits for the
    # lock, this thread never returns and the join times out.
    worker = threading.Thread(target=interrupted_inside_set, daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert returned.is_set(), "the handler waited for the lock its own thread holds"
    assert stop.wait(timeout=5), "the stop was never requested"


@pytest.mark.usefixtures("restore_handlers")
def test_sigterm_sets_the_event() -> None:
    stop = stop_on_signals(logging.getLogger(__name__), "testing")
    signal.raise_signal(signal.SIGTERM)
    assert stop.wait(timeout=5)
