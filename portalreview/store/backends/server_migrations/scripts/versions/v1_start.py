"""Format 1: the starting point.

No server study was ever made in format 1 (server studies began with format 4, stamped so by
``ServerProject.create_empty``); the steps after this one bring a study of an older format up,
as ``store/migrations.py`` does for files.
"""

revision = "v1"
down_revision = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
