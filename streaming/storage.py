"""Where the tables, the checkpoint and the alert outbox live, and how every client reaches it.

Three clients touch the job's storage: Spark writes the checkpoint (and its executors the state
store) through Hadoop's ``s3a`` file system; delta-rs writes the Delta tables from the driver; and
the job's own small files (the checkpoint's stamp, the alert outbox) go through PyArrow's file
systems. ``[storage]`` is the one place that says where and how, and this module turns it into
each client's settings, so that an endpoint or a credential is written once.

Local paths (the embedded default) need none of it: every client then uses the local disk as before.

Credentials are never part of a setting that reaches a command line, a log or a ``repr``: Spark's
launcher line carries only the endpoint, the region and the addressing style; the keys are read
by the driver at start (from its environment or a file) and handed to Spark's Hadoop configuration
at run time (:func:`apply_secrets_to_spark`), to delta-rs as storage options, and to PyArrow.
Spark ships its Hadoop configuration to the executors with the tasks, so they need no credentials
of their own.
"""

from __future__ import annotations

import configparser
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from streaming.errors import ConfigError, StorageError
from streaming.redaction import MASK

#: URI schemes of object storage the job speaks. Hadoop knows S3 as ``s3a``; ``s3://`` means
#: something else on some distributions (EMR's own file system), so the job insists on ``s3a``.
OBJECT_STORE_SCHEMES = ("s3a",)
CredentialSource = Literal["environment", "file", "default-chain"]
_CREDENTIAL_SOURCES = ("environment", "file", "default-chain")
#: The variables ``credentials = "environment"`` reads (the AWS SDKs' own names).
ACCESS_KEY_ENV, SECRET_KEY_ENV, SESSION_TOKEN_ENV = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never the values
        return f"Credentials(access_key_id={MASK!r}, secret_access_key={MASK!r}, " \
               f"session_token={None if self.session_token is None else MASK!r})"


@dataclass(frozen=True)
class StorageConfig:
    """``[storage]``: where the job's files live when that is not the local disk."""
    #: Base URI (``s3a://bucket/prefix``): a relative ``output.root`` or ``output.checkpoint`` lives
    #: under it. Empty: the local file system, relative to the working directory.
    uri: str = ""
    #: The S3 API's address for S3-compatible storage (MinIO, Ceph, s3proxy): ``http://host:port``.
    #: Empty: AWS S3 of ``region``.
    endpoint: str = ""
    region: str = "us-east-1"
    #: Bucket in the path (``endpoint/bucket/key``), as most S3-compatible stores need; false:
    #: virtual-hosted style (``bucket.endpoint/key``), AWS S3's default.
    path_style: bool = False
    #: ``environment`` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN of the driver),
    #: ``file`` (``credentials_file``, in the AWS shared credentials format), or ``default-chain``
    #: (each client's own AWS chain: instance profile, web identity on Kubernetes, ...).
    credentials: str = "environment"
    credentials_file: str = ""
    credentials_profile: str = "default"

    def __post_init__(self) -> None:
        if self.uri and not is_object_store(self.uri):
            raise ConfigError(f"storage.uri: {self.uri!r} is not an object store URI; write s3a://bucket/prefix "
                              f"(or leave it out for the local disk)")
        if self.uri and not _bucket_and_key(self.uri)[0]:
            raise ConfigError(f"storage.uri: {self.uri!r} names no bucket; write s3a://bucket/prefix")
        if self.endpoint and not self.endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"storage.endpoint: {self.endpoint!r} must start with http:// or https://")
        if self.credentials not in _CREDENTIAL_SOURCES:
            raise ConfigError(f"storage.credentials: {self.credentials!r} is not one of "
                              f"{', '.join(_CREDENTIAL_SOURCES)}")
        if self.credentials == "file" and not self.credentials_file:
            raise ConfigError("storage.credentials_file: required when storage.credentials = \"file\"")

    def resolve(self, path: str) -> str:
        """``path`` (a setting such as ``output.root``) as the location it names: a URI stays as
        written; a relative path lives under ``uri`` when there is one."""
        if "://" in path or not self.uri or os.path.isabs(path):
            return path
        return f"{self.uri.rstrip('/')}/{path.strip('/')}"

    # ---------------------------------------------------------------- credentials

    def load_credentials(self) -> Credentials | None:
        """The keys, read now from where ``credentials`` says (None: the clients' own chain)."""
        if self.credentials == "default-chain":
            return None
        if self.credentials == "environment":
            key, secret = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
            if not key or not secret:
                missing = [name for name, value in ((ACCESS_KEY_ENV, key), (SECRET_KEY_ENV, secret)) if not value]
                raise StorageError(f"storage.credentials = \"environment\": {' and '.join(missing)} not set in the "
                                   f"driver's environment (or use credentials = \"file\" or \"default-chain\")")
            return Credentials(key, secret, os.environ.get(SESSION_TOKEN_ENV) or None)
        return _credentials_from_file(Path(self.credentials_file), self.credentials_profile)

    # ---------------------------------------------------------------- each client's settings

    def spark_conf(self) -> dict[str, str]:
        """Hadoop ``s3a`` settings for Spark's conf: no secret among them (they may be printed)."""
        conf = {"spark.hadoop.fs.s3a.endpoint.region": self.region,
                "spark.hadoop.fs.s3a.path.style.access": str(self.path_style).lower()}
        if self.endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(self.endpoint.startswith("https")).lower()
        return conf

    def hadoop_secrets(self, credentials: Credentials | None) -> dict[str, str]:
        """The Hadoop settings that carry ``credentials``: set at run time, never on a command line."""
        if credentials is None:
            return {}
        secrets = {"fs.s3a.access.key": credentials.access_key_id, "fs.s3a.secret.key": credentials.secret_access_key}
        if credentials.session_token:
            secrets["fs.s3a.session.token"] = credentials.session_token
            secrets["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        return secrets

    def delta_options(self, credentials: Credentials | None) -> dict[str, str]:
        """delta-rs storage options (its AWS client's keys)."""
        options = {"AWS_REGION": self.region,
                   "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.path_style).lower(),
                   # Delta on S3 takes one writer per table (the job's driver; docs/deploy.md):
                   # delta-rs then needs no lock service for its commits.
                   "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            options["AWS_ALLOW_HTTP"] = str(self.endpoint.startswith("http://")).lower()
        if credentials is not None:
            options["AWS_ACCESS_KEY_ID"] = credentials.access_key_id
            options["AWS_SECRET_ACCESS_KEY"] = credentials.secret_access_key
            if credentials.session_token:
                options["AWS_SESSION_TOKEN"] = credentials.session_token
        return options

    def arrow_filesystem(self, credentials: Credentials | None):
        """A PyArrow S3 file system for the job's own small files."""
        from pyarrow import fs as pafs

        kwargs: dict[str, Any] = {"region": self.region, "force_virtual_addressing": not self.path_style and
                                  bool(self.endpoint)}
        if self.endpoint:
            scheme, _, host = self.endpoint.partition("://")
            kwargs.update(scheme=scheme, endpoint_override=host.rstrip("/"))
            # Since 2025 the AWS SDKs add a trailing checksum to every upload (``x-amz-trailer``)
            # and check one on every download, which S3-compatible stores that predate it do not
            # speak (s3proxy 2.7 answers the upload "501 Not Implemented"; the download then fails
            # in the SDK). Only where S3 requires one, as before; the process's own setting wins.
            os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "WHEN_REQUIRED")
            os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "WHEN_REQUIRED")
        if credentials is not None:
            kwargs.update(access_key=credentials.access_key_id, secret_key=credentials.secret_access_key,
                          session_token=credentials.session_token)
        return pafs.S3FileSystem(**kwargs)


def is_object_store(location: str) -> bool:
    return location.partition("://")[0].lower() in OBJECT_STORE_SCHEMES and "://" in location


def is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file:")


def local_path(location: str) -> Path:
    return Path(location.removeprefix("file://").removeprefix("file:"))


def _bucket_and_key(uri: str) -> tuple[str, str]:
    rest = uri.partition("://")[2]
    bucket, _, key = rest.partition("/")
    return bucket, key.strip("/")


def _credentials_from_file(path: Path, profile: str) -> Credentials:
    """The AWS shared credentials format: ``[profile]`` with aws_access_key_id, aws_secret_access_key
    and optionally aws_session_token (what ``aws configure`` writes, and what a Kubernetes secret
    mounted as a file usually holds)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(), source=str(path))
    except OSError as exc:
        raise StorageError(f"storage.credentials_file: cannot read {path}: {exc.strerror}") from None
    except configparser.Error as exc:
        # The parser's message may quote a line of the file, which may be a key: only its kind.
        raise StorageError(f"storage.credentials_file: {path} is not in the AWS credentials format "
                           f"({type(exc).__name__})") from None
    if not parser.has_section(profile):
        raise StorageError(f"storage.credentials_file: {path} has no [{profile}] section "
                           f"(storage.credentials_profile); it has: {', '.join(parser.sections()) or 'none'}")
    section = parser[profile]
    missing = [k for k in ("aws_access_key_id", "aws_secret_access_key") if not section.get(k, "").strip()]
    if missing:
        raise StorageError(f"storage.credentials_file: [{profile}] of {path} lacks {' and '.join(missing)}")
    token = section.get("aws_session_token", "").strip() or None
    return Credentials(section["aws_access_key_id"].strip(), section["aws_secret_access_key"].strip(), token)


class Location:
    """A directory of the job's own small files (the checkpoint's stamp, the alert outbox), on the
    local disk or in object storage, through one PyArrow file system.

    Object storage has no directories and no rename: every write here is a whole object in one PUT
    (atomic to readers), and nothing relies on an empty directory existing.
    """

    def __init__(self, location: str, storage: StorageConfig | None = None,
                 credentials: Credentials | None = None):
        from pyarrow import fs as pafs

        self.location = location.rstrip("/")
        if is_local(location):
            self._fs = pafs.LocalFileSystem()
            self._root = str(local_path(location).resolve())
        elif is_object_store(location):
            storage = storage or StorageConfig()
            self._fs = storage.arrow_filesystem(credentials)
            bucket, key = _bucket_and_key(location)
            self._root = f"{bucket}/{key}".rstrip("/")
        else:
            raise StorageError(f"{location}: not a local path or an s3a:// URI; the job's files cannot live there")

    @classmethod
    def over(cls, filesystem, root: str, location: str) -> "Location":
        """A location on a given PyArrow file system (``root`` is the path on it), e.g. an in-memory one."""
        self = cls.__new__(cls)
        self.location, self._fs, self._root = location.rstrip("/"), filesystem, root.rstrip("/")
        return self

    def __repr__(self) -> str:
        return f"Location({self.location!r})"

    def _path(self, name: str) -> str:
        return posixpath.join(self._root, name) if name else self._root

    def read_bytes(self, name: str) -> bytes | None:
        """The file's content, or None when there is no such file."""
        from pyarrow.lib import ArrowIOError

        try:
            with self._fs.open_input_stream(self._path(name)) as stream:
                return stream.read()
        except FileNotFoundError:
            return None
        except ArrowIOError as exc:
            if "not exist" in str(exc).lower() or "NoSuchKey" in str(exc):
                return None
            raise StorageError(f"{self.location}/{name}: cannot read: {exc}") from None

    def write_bytes(self, name: str, data: bytes) -> None:
        """Create or replace the file in one write."""
        if isinstance(self._fs, _local_fs_type()):
            path = Path(self._path(name))
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            with open(partial, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, path)  # a crash leaves the old file or the new one, never half of one
            return
        try:
            if type(self._fs).__name__ != "S3FileSystem":  # S3 needs no parent; a marker object would be noise
                self._fs.create_dir(posixpath.dirname(self._path(name)), recursive=True)
            with self._fs.open_output_stream(self._path(name)) as stream:
                stream.write(data)
        except OSError as exc:
            raise StorageError(f"{self.location}/{name}: cannot write: {exc}") from None

    def list(self, subdir: str = "") -> list[tuple[str, float]]:
        """(file name, modification time in seconds) of the files directly in ``subdir``; [] if none."""
        from pyarrow import fs as pafs

        try:
            infos = self._fs.get_file_info(pafs.FileSelector(self._path(subdir), allow_not_found=True))
        except OSError as exc:
            raise StorageError(f"{self.location}/{subdir}: cannot list: {exc}") from None
        return sorted((posixpath.basename(i.path), i.mtime.timestamp() if i.mtime else 0.0)
                      for i in infos if i.type == pafs.FileType.File)

    def delete(self, name: str) -> None:
        try:
            self._fs.delete_file(self._path(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"{self.location}/{name}: cannot delete: {exc}") from None


def _local_fs_type():
    from pyarrow import fs as pafs

    return pafs.LocalFileSystem


def apply_secrets_to_spark(spark, storage: StorageConfig, credentials: Credentials | None) -> None:
    """Give the running session the storage's credentials, through the driver's Hadoop configuration
    (the base of every Hadoop configuration Spark makes, the checkpoint's and the executors' included).

    Set here rather than at the launch: the launch's settings are a command line (``ps`` shows it)
    and a printed ``spark-submit`` line. Spark redacts these keys in its UI and logs
    (``spark.redaction.regex`` matches ``secret``, ``token`` and ``access.key``)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in storage.hadoop_secrets(credentials).items():
        hadoop.set(key, value)
