"""The names verify/, study/ and run/ import from `pipeline.hub.hub_io`, the one file pipeline/hub/ was before
it was split by role: [`pipeline.hub.endpoint`], [`pipeline.hub.http`] and [`pipeline.hub.fetch`]. Import
from those; this file goes once no module imports from it.
"""

from .endpoint import hub_endpoint, redacted
from .fetch import HubOptions, check_options, fetch_run, hub_options
from .http import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S, Deadline, hub_client_timeout

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_TIMEOUT_S",
    "Deadline",
    "HubOptions",
    "check_options",
    "fetch_run",
    "hub_client_timeout",
    "hub_endpoint",
    "hub_options",
    "redacted",
]
