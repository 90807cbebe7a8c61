"""``[storage]``: one place for where the tables and the checkpoint live and how each client
(Spark's s3a, delta-rs, the job's own files) reaches them; credentials never printed."""

from __future__ import annotations

import argparse
import shlex

import pytest

from streaming.config import ConfigError, parse_config
from streaming.errors import StorageError
from streaming.storage import Credentials, StorageConfig

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
STORAGE = {"uri": "s3a://monitor/prod", "endpoint": "http://127.0.0.1:9000", "region": "eu-west-1",
           "path_style": True}


def test_relative_tables_and_checkpoint_live_under_the_storage_uri():
    config = parse_config({"storage": STORAGE, "output": {"checkpoint": "checkpoints/job-v2"}})
    assert config.output.table_path("assignments") == "s3a://monitor/prod/data/assignments"
    assert config.output.checkpoint_path == "s3a://monitor/prod/checkpoints/job-v2"
    # Beside the checkpoint, on the same storage: a driver moved to another host finds it.
    assert config.alerts.outbox_dir(config.output) == "s3a://monitor/prod/checkpoints/job-v2-alert-outbox"


def test_a_uri_or_an_absolute_path_in_output_is_kept_as_written():
    config = parse_config({"storage": STORAGE, "output": {"root": "s3a://other/tables", "checkpoint": "/var/cp"}})
    assert config.output.table_path("alerts") == "s3a://other/tables/alerts"
    assert config.output.checkpoint_path == "/var/cp"


def test_without_a_storage_section_everything_stays_on_the_local_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = parse_config({})
    assert config.storage == StorageConfig()
    assert config.output.checkpoint_path == str(tmp_path / "checkpoints" / "job")
    assert config.alerts.outbox_dir(config.output) == str(tmp_path / "checkpoints" / "job-alert-outbox")


@pytest.mark.parametrize("storage, message", [
    ({"uri": "s3://bucket/x"}, "storage.uri: 's3://bucket/x' is not an object store URI; write s3a://"),
    ({"uri": "s3a:///x"}, "storage.uri: 's3a:///x' names no bucket"),
    ({"endpoint": "127.0.0.1:9000"}, "storage.endpoint: '127.0.0.1:9000' must start with http://"),
    ({"credentials": "vault"}, "storage.credentials: 'vault' is not one of environment, file, default-chain"),
    ({"credentials": "file"}, "storage.credentials_file: required"),
    ({"path_style": "yes"}, "storage.path_style: expected true or false"),
    ({"bucket": "x"}, "storage.bucket: unknown key; known keys of [storage]: uri, endpoint"),
])
def test_a_bad_storage_setting_is_named(storage, message):
    with pytest.raises(ConfigError) as info:
        parse_config({"storage": storage}, source="job.toml")
    assert message in str(info.value) and str(info.value).startswith("job.toml: ")


def test_each_client_gets_the_same_endpoint_region_and_addressing():
    storage = StorageConfig(**STORAGE)
    credentials = Credentials("AKIDEXAMPLE", SECRET)
    assert storage.spark_conf() == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000", "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.path.style.access": "true", "spark.hadoop.fs.s3a.connection.ssl.enabled": "false"}
    assert storage.hadoop_secrets(credentials) == {"fs.s3a.access.key": "AKIDEXAMPLE", "fs.s3a.secret.key": SECRET}
    delta = storage.delta_options(credentials)
    assert (delta["AWS_ENDPOINT_URL"], delta["AWS_REGION"], delta["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"],
            delta["AWS_ALLOW_HTTP"], delta["AWS_ACCESS_KEY_ID"], delta["AWS_SECRET_ACCESS_KEY"]) == (
        "http://127.0.0.1:9000", "eu-west-1", "false", "true", "AKIDEXAMPLE", SECRET)
    assert SECRET not in repr(credentials) and SECRET not in str(storage.spark_conf())


def test_a_session_token_selects_hadoops_temporary_credentials_provider():
    secrets = StorageConfig().hadoop_secrets(Credentials("AKID", SECRET, "token-1"))
    assert secrets["fs.s3a.session.token"] == "token-1"
    assert secrets["fs.s3a.aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"


def test_credentials_come_from_the_environment_or_say_which_variable_is_missing(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    assert StorageConfig().load_credentials() == Credentials("AKID", SECRET, None)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StorageError, match="AWS_SECRET_ACCESS_KEY not set in the driver's environment"):
        StorageConfig().load_credentials()
    assert StorageConfig(credentials="default-chain").load_credentials() is None


def test_credentials_come_from_a_shared_credentials_file_and_errors_never_quote_it(tmp_path):
    file = tmp_path / "credentials"
    file.write_text(f"[default]\naws_access_key_id = AKID\n\n[monitor]\naws_access_key_id = AKID2\n"
                    f"aws_secret_access_key = {SECRET}\naws_session_token = tok\n")
    storage = StorageConfig(credentials="file", credentials_file=str(file), credentials_profile="monitor")
    assert storage.load_credentials() == Credentials("AKID2", SECRET, "tok")
    with pytest.raises(StorageError, match=r"\[default\] of .* lacks aws_secret_access_key"):
        StorageConfig(credentials="file", credentials_file=str(file)).load_credentials()
    with pytest.raises(StorageError, match=r"has no \[prod\] section .* it has: default, monitor"):
        StorageConfig(credentials="file", credentials_file=str(file), credentials_profile="prod").load_credentials()
    file.write_text(f"aws_secret_access_key = {SECRET}\n")  # no section header
    with pytest.raises(StorageError) as info:
        storage.load_credentials()
    assert "not in the AWS credentials format" in str(info.value) and SECRET not in str(info.value)


def test_the_printed_spark_submit_line_has_the_endpoint_and_never_a_credential(tmp_path, monkeypatch):
    from streaming.cli.run import _job_argv, spark_submit_command
    from streaming.job import spark_session

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("hadoop-aws-3.5.0.jar", "bundle-2.29.52.jar"):
        (jars / name).write_bytes(b"")
    bootstrapped = spark_session.jar_dir
    monkeypatch.setattr(spark_session, "jar_dir", lambda name: jars if name == "s3" else bootstrapped(name))
    config = parse_config({"storage": STORAGE})
    args = argparse.Namespace(config=None, bootstrap_servers=None, membership_topic=None, heartbeat_topic=None,
                              available_now=True)
    line = shlex.join(spark_submit_command(config, {}, _job_argv(args, config)))
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in line
    assert f"spark.executor.extraClassPath={jars}/bundle-2.29.52.jar:{jars}/hadoop-aws-3.5.0.jar" in line
    assert "--output s3a://monitor/prod/data --checkpoint s3a://monitor/prod/checkpoints/job" in line
    assert SECRET not in line and "AKIDEXAMPLE" not in line and "secret.key" not in line


def test_the_shipped_config_states_the_storage_defaults():
    from streaming.config import load_config

    assert load_config().storage == StorageConfig()


def test_the_credentials_reach_spark_at_run_time_through_its_hadoop_configuration():
    from types import SimpleNamespace

    from streaming.storage import apply_secrets_to_spark

    hadoop = {}
    conf = SimpleNamespace(set=hadoop.__setitem__)
    spark = SimpleNamespace(sparkContext=SimpleNamespace(_jsc=SimpleNamespace(hadoopConfiguration=lambda: conf)))
    apply_secrets_to_spark(spark, StorageConfig(**STORAGE), Credentials("AKID", SECRET))
    assert hadoop == {"fs.s3a.access.key": "AKID", "fs.s3a.secret.key": SECRET}
    hadoop.clear()
    apply_secrets_to_spark(spark, StorageConfig(**STORAGE), None)  # default-chain: nothing to hand over
    assert hadoop == {}


def test_the_printed_line_imports_the_packages_of_its_own_checkout():
    from streaming.cli.run import spark_submit_command
    from streaming.config import Config
    from streaming.paths import project_root

    line = spark_submit_command(Config(), {}, [])
    assert f"PYTHONPATH={project_root()}" in line[:line.index(str(project_root() / "streaming" / "job" / "main.py"))]
