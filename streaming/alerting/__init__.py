"""Alerts: the rules (from the TOML), their evaluation in event time (pure, called by the engine),
and delivery to a webhook (:mod:`streaming.alerting.delivery`)."""
