"""Everything the service posts to GitHub, rendered from plain data: the result comment and
commit status of a job, and the short replies to commands. One import for the service; the
pieces live in `report_views` (data), `report_markdown` (escaping), `report_comment` and
`report_replies`."""

from __future__ import annotations

from service.report_comment import (
    COMMENT_BUDGET,
    INTERPRETER_NOTE,
    MAX_COMMENT_CHARS,
    MAX_STATUS_DESCRIPTION,
    headline,
    marker,
    render_comment,
    render_status,
    summary,
)
from service.report_replies import (
    render_cancel_summary,
    render_command_error,
    render_duplicate,
    render_help,
    render_not_allowed,
    render_retest_summary,
)
from service.report_views import BackendInfo, JobView, StatusUpdate

__all__ = [
    "COMMENT_BUDGET",
    "INTERPRETER_NOTE",
    "MAX_COMMENT_CHARS",
    "MAX_STATUS_DESCRIPTION",
    "BackendInfo",
    "JobView",
    "StatusUpdate",
    "headline",
    "marker",
    "render_cancel_summary",
    "render_command_error",
    "render_comment",
    "render_duplicate",
    "render_help",
    "render_not_allowed",
    "render_retest_summary",
    "render_status",
    "summary",
]
