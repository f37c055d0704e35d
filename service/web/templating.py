"""The pages' Jinja2 environment over `service/web/templates/`, autoescaped: one for every
page the service renders."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, select_autoescape

templates = Environment(
    loader=PackageLoader("service.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
