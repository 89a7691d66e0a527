"""The schedule catalog: an indexed view of pending schedules, their versions and
dead letters, kept current from Kafka topics for the API and the admin page.

The schedules topic stays the system of record and the pipeline the only thing that
fires; the catalog can be deleted at any time and is rebuilt from the topics.
"""

from delayline.catalog.follower import CatalogFollower, FollowConfig, FollowStatus
from delayline.catalog.model import (
    MAX_PAGE,
    DeadLetter,
    Page,
    Pending,
    PendingQuery,
    Stats,
    Version,
)
from delayline.catalog.sqlite import SqliteCatalog
from delayline.catalog.store import CatalogStore

__all__ = [
    "MAX_PAGE",
    "CatalogFollower",
    "CatalogStore",
    "DeadLetter",
    "FollowConfig",
    "FollowStatus",
    "Page",
    "Pending",
    "PendingQuery",
    "SqliteCatalog",
    "Stats",
    "Version",
]
