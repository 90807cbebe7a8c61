"""The job configuration: defaults, overrides and errors that name the bad key."""

from __future__ import annotations

import pytest

from streaming.config import Config, ConfigError, load_config, parse_config


def test_shipped_config_file_is_valid_and_matches_the_defaults():
    config = load_config()
    assert config.kafka == Config().kafka
    assert config.output.app_id == "rebalance-monitor-v1"
    assert config.spark.conf["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.parametrize("data, message", [
    ({"kafka": {"bootstrap": "x"}}, "kafka.bootstrap: unknown key"),
    ({"kafak": {}}, "unknown section [kafak]"),
    ({"kafka": {"max_offsets_per_trigger": "10"}}, "kafka.max_offsets_per_trigger: expected an integer"),
    ({"kafka": {"max_record_bytes": -1}}, "kafka.max_record_bytes: must not be negative"),
    ({"output": {"root": ""}}, "output.root: expected a non-empty string"),
    ({"spark": {"conf": "x"}}, "spark.conf: must be a table"),
])
def test_bad_config_names_the_key(data, message):
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert message in str(info.value)


def test_flags_override_the_file_and_pass_through_kafka_options():
    config = parse_config({"kafka": {"options": {"security.protocol": "SASL_SSL", "sasl.password": "s3cr3t"}}})
    config = config.with_overrides(bootstrap_servers="b:1", membership_topic="m", output="/tmp/x")
    opts = config.kafka.source_options("m")
    assert opts["kafka.bootstrap.servers"] == "b:1"
    assert opts["subscribe"] == "m"
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    # Only heartbeats, the bulk, are rate-limited: membership is read in full every batch.
    assert "maxOffsetsPerTrigger" not in opts
    assert config.kafka.source_options("rebalance.heartbeats")["maxOffsetsPerTrigger"] == "500000"
    assert config.kafka.redacted_options()["sasl.password"] == "***"
    assert config.output.table_path("events") == "/tmp/x/events"


def test_missing_config_file_given_explicitly_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_the_kafka_source_does_not_hold_a_quiet_partition_s_fetch_for_half_a_second_unless_told_to():
    assert parse_config({}).kafka.source_options("m")["kafka.fetch.max.wait.ms"] == "50"
    config = parse_config({"kafka": {"options": {"fetch.max.wait.ms": 200}}})
    assert config.kafka.source_options("m")["kafka.fetch.max.wait.ms"] == "200"


def test_the_shipped_file_states_every_default_of_the_code_and_no_other_value():
    """conf/rebalance-monitor.toml says "these are the defaults": each value it states is the
    code's default, and every setting of [kafka], [output], [job] and [spark] is in it."""
    import tomllib
    from dataclasses import fields

    from streaming.alerting.rules import GroupRules
    from streaming.config import _SECTIONS
    from streaming.job.spark_session import DEFAULT_CONF
    from streaming.paths import conf_dir

    data = tomllib.loads((conf_dir() / "rebalance-monitor.toml").read_text())
    defaults = Config()
    for section, cls in _SECTIONS.items():
        stated = data[section]
        for f in fields(cls):
            if f.name in ("options", "conf"):
                continue
            assert f.name in stated, f"[{section}] {f.name} is not in the shipped file"
            value = tuple(stated[f.name]) if isinstance(stated[f.name], list) else stated[f.name]
            assert value == getattr(getattr(defaults, section), f.name), f"[{section}] {f.name}"
    for key, value in data["spark"]["conf"].items():
        assert DEFAULT_CONF.get(key) == value, f"[spark.conf] {key} = {value!r}, the code's default is " \
                                               f"{DEFAULT_CONF.get(key)!r}"
    assert data["kafka"].get("options", {}) == {}
    rules = GroupRules()
    for rule, stated in data["alerts"].items():
        for key, value in stated.items():
            assert getattr(getattr(rules, rule), key) == value, f"[alerts.{rule}] {key}"


def test_credentials_never_show_in_a_printed_configuration():
    config = parse_config({"kafka": {"options": {"sasl.jaas.config": "PlainLoginModule password='hunter22'",
                                                 "ssl.key.password": "k3y-s3cret", "security.protocol": "SASL_SSL"}}})
    for shown in (repr(config), str(config), repr(config.kafka)):
        assert "hunter22" not in shown and "k3y-s3cret" not in shown
        assert "SASL_SSL" in shown  # what is not a credential is still shown
    # The job still passes the real values to Kafka.
    assert config.kafka.source_options("t")["kafka.ssl.key.password"] == "k3y-s3cret"


def test_a_bad_alert_rule_is_a_config_error_of_its_own_type():
    from streaming.errors import AlertConfigError

    with pytest.raises(AlertConfigError, match="alerts.imbalance.max_minus_min"):
        parse_config({"alerts": {"imbalance": {"max_minus_min": "two"}}})


@pytest.mark.parametrize("data, message", [
    ({"job": {"trigger_interval": "soon"}},
     "conf/x.toml: job.trigger_interval: 'soon' is not a duration; write it as Spark does, e.g. '2 seconds'"),
    ({"kafka": {"starting_offsets": "beginning"}},
     "conf/x.toml: kafka.starting_offsets: 'beginning' is not 'earliest', 'latest' or Spark's JSON offsets"),
    ({"alerts": {"webhook": {"url": "localhost:5001/alerts"}}},
     "alerts.webhook.url: expected an http:// or https:// URL with a host, got 'localhost:5001/...' "
     "(no scheme: write http://localhost:5001/...)"),
])
def test_a_value_of_the_wrong_form_is_refused_at_load_with_the_value_as_written(data, message):
    with pytest.raises(ConfigError) as info:
        parse_config(data, "conf/x.toml")
    assert message in str(info.value)


def test_a_webhook_url_is_never_echoed_with_its_path_or_credentials():
    with pytest.raises(ConfigError) as info:
        parse_config({"alerts": {"webhook": {"url": "htps://bot:pw@hooks.example.com/services/T0/B0/s3cr3t"}}})
    shown = str(info.value)
    assert "'htps://hooks.example.com/...'" in shown
    assert "s3cr3t" not in shown and "pw" not in shown
