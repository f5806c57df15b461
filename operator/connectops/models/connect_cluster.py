"""``ConnectCluster``: how the operator reaches one Kafka Connect worker group."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from connectops.models.admission import rules
from connectops.models.base import CamelModel, Condition, SecretKeyRef, StatusModel
from connectops.models.checks import SparkCheckDefaults

#: an http(s) URL whose authority holds no user-info: credentials come from Secrets (basicAuth),
#: never from a URL, which conditions, Events, logs and the check's arguments may show. The API
#: server checks it at admission (the CRD's pattern); the operator checks it again on read
URL_PATTERN = r"^https?://[^/?#@\s]+(?:[/?#]\S*)?$"
_URL = re.compile(URL_PATTERN)


def _http_url(url: str) -> str:
    # a message of its own: pydantic's would quote the pattern, and the URL is never quoted
    if _URL.fullmatch(url) is None:
        authority = url.partition("://")[2].split("/")[0].split("?")[0].split("#")[0]
        if "@" in authority:
            raise ValueError("a URL must not hold credentials (user:password@): name a Secret in basicAuth instead")
        raise ValueError("must be an http:// or https:// URL with a host")
    return url


#: a URL the operator or its check calls; its credentials, if any, come from a Secret
HttpUrl = Annotated[str, Field(json_schema_extra={"pattern": URL_PATTERN}), AfterValidator(_http_url)]


class BasicAuth(CamelModel):
    """HTTP basic auth, both parts read from one Secret."""

    secret_name: Annotated[str, Field(min_length=1, description="Secret holding the credentials.")]
    username_key: str = Field(default="username", description="Key of the user name in the Secret.")
    password_key: str = Field(default="password", description="Key of the password in the Secret.")


class RestTls(CamelModel):
    """TLS settings for the Connect REST API."""

    ca_secret_ref: SecretKeyRef | None = Field(
        default=None, description="PEM CA bundle used to verify the worker's certificate."
    )
    insecure_skip_verify: bool = Field(default=False, description="Skip certificate verification (tests only).")


class KafkaAccess(CamelModel):
    """How the operator reaches the Kafka cluster behind the worker group (offsets work)."""

    model_config = rules(
        (
            "!has(self.configFrom) || !has(self.config) || !self.configFrom.exists(k, k in self.config)",
            "a Kafka setting is set in both config and configFrom",
        )
    )

    bootstrap_servers: Annotated[
        str, Field(min_length=1, description="Kafka bootstrap servers, host:port[,host:port].")
    ]
    config: dict[str, str] = Field(
        default_factory=dict,
        description="Non-sensitive Kafka client settings (librdkafka names), e.g. security.protocol.",
    )
    config_from: dict[str, SecretKeyRef] = Field(
        default_factory=dict,
        description=(
            "Sensitive Kafka client settings read from Secrets of this namespace, e.g. sasl.password; "
            "used for tombstone resets, offset reads and the offset-syncs cleanup, and given to the "
            "checks' driver pod as env vars from the Secret (never in its arguments)."
        ),
    )

    @model_validator(mode="after")
    def _one_source_per_setting(self) -> KafkaAccess:
        both = sorted(set(self.config) & set(self.config_from))
        if both:
            raise ValueError(f"Kafka settings {both} are set in both config and configFrom")
        return self


class ConnectTopics(CamelModel):
    """The worker group's internal topics; defaults are Connect's own."""

    offsets: str = Field(default="connect-offsets", description="offset.storage.topic")
    configs: str = Field(default="connect-configs", description="config.storage.topic")
    status: str = Field(default="connect-status", description="status.storage.topic")


class WorkerMetrics(CamelModel):
    """Where the workers' metrics can be read, and the worker settings Connect's REST API does not
    show. The post-change check reads them to see producer pressure on source tasks (small
    batches, a growing outstanding-record queue, offset commits that fail or trail)."""

    urls: list[Annotated[HttpUrl, Field(min_length=1, max_length=2048)]] = Field(
        min_length=1,
        max_length=32,
        description="Prometheus endpoints of the workers (one per worker, e.g. the JMX exporter's "
        "http://connect-0.connect:9404/metrics), named as Strimzi's example exporter rules name them. "
        "Subject to the same allowlist as restUrl; no credentials in them (basicAuth).",
    )
    basic_auth: BasicAuth | None = Field(
        default=None,
        description="Basic auth for the metrics endpoints, from a Secret: the check's driver reads it from "
        "env vars set from the Secret (never from its arguments).",
    )
    offset_flush_timeout_ms: int = Field(
        default=5000, ge=1, le=3_600_000, description="The workers' offset.flush.timeout.ms (Connect's default 5000)."
    )
    offset_flush_interval_ms: int = Field(
        default=60000,
        ge=1,
        le=86_400_000,
        description="The workers' offset.flush.interval.ms (Connect's default 60000).",
    )


class ConnectClusterSpec(CamelModel):
    """A Kafka Connect worker group: where its REST API is and how to reach its Kafka."""

    rest_url: Annotated[
        HttpUrl,
        Field(
            min_length=1,
            max_length=2048,
            description="Base URL of the Connect REST API, e.g. http://connect:8083; no credentials in it (basicAuth).",
        ),
    ]
    basic_auth: BasicAuth | None = Field(
        default=None,
        description="Optional basic auth for the REST API (the check's driver gets it as env vars from the Secret).",
    )
    tls: RestTls | None = Field(default=None, description="Optional TLS settings.")
    kafka: KafkaAccess | None = Field(default=None, description="Kafka access, needed for tombstone resets and checks.")
    topics: ConnectTopics = Field(default_factory=ConnectTopics, description="Connect's internal topic names.")
    spark_check: SparkCheckDefaults | None = Field(
        default=None, description="SparkApplication settings for checks (else the operator's defaults)."
    )
    request_timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="Timeout of one REST call.")
    listing_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        le=600,
        description=(
            "Deadline of the one call that lists every connector of the worker group with its config and "
            "status (GET /connectors?expand=status&expand=info), used by resyncs and restarts; never shorter "
            "than requestTimeoutSeconds. Connect takes a snapshot of every connector's config for each "
            "connector it lists, so the answer takes time quadratic in the connectors (10,000 took over 30 s "
            "on a test worker). Past it, connectors are read one by one until the next resync period."
        ),
    )
    worker_metrics: WorkerMetrics | None = Field(
        default=None, description="Where the checks read the workers' metrics (producer pressure diagnosis)."
    )


class Capabilities(StatusModel):
    """What the worker's REST API supports, derived from its version (see the facts table)."""

    stop: bool = Field(default=False, description="STOPPED state and offsets GET (3.5+, KIP-875).")
    alter_offsets: bool = Field(default=False, description="offsets PATCH/DELETE (3.6+).")
    initial_state: bool = Field(default=False, description="initial_state on create (3.7+).")
    restart_only_failed: bool = Field(default=False, description="restart?includeTasks&onlyFailed (3.0+).")
    plugin_versions: bool = Field(
        default=False, description="Several versions of a plugin side by side, chosen per connector (4.1+, KIP-891)."
    )


class WorkerHealthStatus(StatusModel):
    status: str = Field(description="healthy, starting, unhealthy (KIP-1017), or unknown before Kafka 3.9.")
    message: str | None = Field(default=None, description="The worker's own words.")


class ConnectClusterStatus(StatusModel):
    reachable: bool | None = Field(default=None, description="Whether the REST API answered.")
    worker_health: WorkerHealthStatus | None = Field(
        default=None, description="The worker's GET /health answer (the worker restUrl reaches)."
    )
    worker_version: str | None = Field(default=None, description="Kafka version of the worker.")
    kafka_cluster_id: str | None = Field(default=None, description="Kafka cluster id.")
    capabilities: Capabilities | None = Field(default=None, description="Detected capabilities.")
    observed_generation: int | None = Field(default=None, description="Last handled generation.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready.")
