"""The operators tested commits know, as their runners reported them: written when a job
completes, read when a command names an operator."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.engine import Database, utcnow
from service.db.models import KnownOperators

RECENT = 20  # reports whose union is "the operators of the repository"


def record_operators(session: Session, repo: str, sha: str, operators: Sequence[str]) -> None:
    """Keep what a runner found at `sha` (the newest report of a commit wins). Two jobs of a
    commit may report at once (on two replicas): the second updates the first's row."""
    query = select(KnownOperators).where(KnownOperators.repo == repo, KnownOperators.sha == sha)
    row = session.scalars(query).first()
    if row is None:
        try:
            with session.begin_nested():
                session.add(KnownOperators(repo=repo, sha=sha, operators=list(operators)))
            return
        except IntegrityError:
            row = session.scalars(query).one()
    row.operators = list(operators)
    row.reported_at = utcnow()


class OperatorCatalog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def at(self, repo: str, sha: str) -> frozenset[str] | None:
        """The operators of commit `sha`, when a runner has tested it."""
        with self.db.reads() as session:
            row = session.scalars(
                select(KnownOperators).where(KnownOperators.repo == repo, KnownOperators.sha == sha)
            ).first()
        return frozenset(row.operators) if row is not None else None

    def of_repo(self, repo: str) -> frozenset[str]:
        """The operators recent tested commits of `repo` know (empty: none reported yet)."""
        with self.db.reads() as session:
            rows = session.scalars(
                select(KnownOperators.operators)
                .where(KnownOperators.repo == repo)
                .order_by(KnownOperators.reported_at.desc())
                .limit(RECENT)
            ).all()
        return frozenset(name for names in rows for name in names)
