"""`convo serve`: the warehouse behind the service's own summary endpoint."""

from convo_analytics.serve._app import create_serve_app

__all__ = ["create_serve_app"]
