"""``python -m convo_analytics.cli`` runs the ``convo`` command."""

from convo_analytics.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
