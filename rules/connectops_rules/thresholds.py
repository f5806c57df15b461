"""The check's thresholds: one definition of each, read by every place that names one.

A threshold travels from the Connector's ``spec.check`` (the operator's ``CheckSpec``, whose
field is the camelCase ``name``) through the SparkApplication's arguments (``flag``, written by
the operator's planning and parsed by the job's ``cli``) into the job's ``verdict.Settings``,
and back out in the verdict's ``settings`` block (``name`` again). The CR leaves a threshold
unset and the job applies ``default``; ``minimum`` and ``maximum`` bound it on both sides (the
CRD's schema refuses what the job would refuse). ``CR`` lists those a Connector may set, in the
order the operator writes them; ``JOB_ONLY`` those only the job's command line takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Threshold(Generic[T]):
    #: the CR field and the verdict's settings key
    name: str
    #: the job's option
    flag: str
    default: T
    #: the value's type on the command line
    kind: type[int] | type[float]
    help: str
    #: inclusive bounds, as the CRD's schema states them (``ge``, ``le``)
    minimum: int | None = None
    maximum: int | None = None
    #: appended to the value on the command line (``s``: the job reads a duration)
    unit: str = ""

    @property
    def dest(self) -> str:
        """The option's destination in the job's parsed arguments (argparse's rule)."""
        return self.flag.removeprefix("--").replace("-", "_")

    def argument(self, value: float) -> str:
        """The value as the operator writes it into the job's arguments."""
        return f"{value}{self.unit}"

    def problem(self, value: float | None, label: str | None = None) -> str | None:
        """Why ``value`` is out of bounds (None: within them, or unset), naming it ``label``
        (default: the flag)."""
        if value is None:
            return None
        if self.minimum is not None and value < self.minimum:
            return f"{label or self.flag} must be >= {self.minimum}, not {value}"
        if self.maximum is not None and value > self.maximum:
            return f"{label or self.flag} must be <= {self.maximum}, not {value}"
        return None


MAX_LAG: Final[Threshold[int]] = Threshold("maxLag", "--max-lag", 10_000, int, "total lag limit (records)", minimum=0)
MAX_SKEW: Final[Threshold[float]] = Threshold(
    "maxSkew", "--max-skew", 2.0, float, "traffic max/mean limit per topic", minimum=1
)
MAX_GINI: Final[Threshold[float]] = Threshold(
    "maxGini", "--max-gini", 0.4, float, "traffic Gini limit per topic", minimum=0, maximum=1
)
#: Cruise Control's count-goal balance threshold
ASSIGNMENT_THRESHOLD: Final[Threshold[float]] = Threshold(
    "assignmentThreshold", "--assignment-threshold", 1.10, float, "partitions per member max/mean limit", minimum=1
)
#: Burrow's evaluator settings of the same names (its defaults)
ALLOWED_LAG: Final[Threshold[int]] = Threshold(
    "allowedLag", "--allowed-lag", 0, int, "Burrow allowed-lag: a partition this close is OK", minimum=0
)
MINIMUM_COMPLETE: Final[Threshold[float]] = Threshold(
    "minimumComplete",
    "--minimum-complete",
    0.0,
    float,
    "Burrow minimum-complete: rings less full are OK, not judged",
    minimum=0,
    maximum=1,
)
MAX_LAG_WHILE_PAUSED: Final[Threshold[int | None]] = Threshold(
    "maxLagWhilePaused",
    "--max-lag-while-paused",
    None,
    int,
    "records of lag after which a paused connector is UNHEALTHY",
    minimum=0,
)
MAX_TIME_LAG_WHILE_PAUSED: Final[Threshold[float | None]] = Threshold(
    "maxTimeLagWhilePausedSeconds",
    "--max-time-lag-while-paused",
    None,
    float,
    "time lag after which a paused connector is UNHEALTHY (e.g. 30m)",
    minimum=1,
    unit="s",
)
#: records a topic needs in the traffic window before its balance is judged
MIN_TRAFFIC: Final[Threshold[int]] = Threshold(
    "minTraffic",
    "--min-traffic",
    100,
    int,
    "records a topic needs in the window before its balance is judged",
    minimum=0,
)
#: Burrow's ring size (its ``intervals``)
WINDOW: Final[Threshold[int]] = Threshold("window", "--window", 10, int, "Burrow window in samples", minimum=1)
TOP_N: Final[Threshold[int]] = Threshold("topN", "--top-n", 20, int, "partitions listed per list", minimum=1)

CR: Final[tuple[Threshold[Any], ...]] = (
    MAX_LAG,
    MAX_SKEW,
    MAX_GINI,
    ASSIGNMENT_THRESHOLD,
    ALLOWED_LAG,
    MINIMUM_COMPLETE,
    MAX_LAG_WHILE_PAUSED,
    MAX_TIME_LAG_WHILE_PAUSED,
)
JOB_ONLY: Final[tuple[Threshold[Any], ...]] = (MIN_TRAFFIC, WINDOW, TOP_N)
