"""The Streamlit app's data and charts (pages in dashboards/app_pages/ hold only UI)."""

from convo_analytics.dashboard import _charts as charts
from convo_analytics.dashboard import _queries as queries
from convo_analytics.dashboard import _workspaces as workspaces
from convo_analytics.dashboard._queries import KPIS, Filters

__all__ = ["KPIS", "Filters", "charts", "queries", "workspaces"]
