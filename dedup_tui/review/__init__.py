"""The review model: the view, the cluster list, the cursor, the queue and the decisions, with no
user interface in it (the app's screens render it; a script can drive it). See model.Review."""

from .index import FILTERS, SORTS, ClusterIndex, Listing, parse_filter
from .model import DEFAULT_THRESHOLD, Cursor, Match, NeedsConfirmation, Plan, Request, Review, ReviewError, View

__all__ = [
    "DEFAULT_THRESHOLD",
    "FILTERS",
    "SORTS",
    "ClusterIndex",
    "Cursor",
    "Listing",
    "Match",
    "NeedsConfirmation",
    "Plan",
    "Request",
    "Review",
    "ReviewError",
    "View",
    "parse_filter",
]
