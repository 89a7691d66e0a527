"""What the API's request handlers share for the life of the process."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from delayline.api.config import ApiConfig
from delayline.api.writes import Writers
from delayline.catalog import CatalogFollower, CatalogStore
from delayline.clock import Clock


@dataclass
class ApiState:
    """The catalog, its follower, the Kafka writers and the settings.

    Attributes:
        config: The API settings.
        store: The catalog the reads come from.
        follower: Keeps ``store`` current.
        writers: Write schedules and cancels to the schedules topics.
        clock: "Now" for dashboards and relative due times.
    """

    config: ApiConfig
    store: CatalogStore
    follower: CatalogFollower
    writers: Writers
    clock: Clock

    def topic_of(self, schedule_id: str) -> str:
        """The schedules topic a new version of ``schedule_id`` goes to: where it is
        pending, else the first schedules topic."""
        current = self.store.locate(schedule_id)
        if current:
            return max(current, key=lambda p: p.updated_ms).topic
        return self.config.schedules_topics[0]


def api_state(request: Request) -> ApiState:
    """The state of the app serving ``request``."""
    state: ApiState = request.app.state.api
    return state
