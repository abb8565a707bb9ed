"""convo-analytics: analytics and reporting for a hosted Conversational Assistant Service."""

__version__ = "0.1.0"
