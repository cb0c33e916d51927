"""Trace and Evaluation, as FlashInfer-Bench writes them (one JSON object per line)."""
import enum
import math
from dataclasses import dataclass, field

from harness.data.jsonio import DataError, Fields, decode_float, encode_float
from harness.data.workload import Workload


class Status(str, enum.Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"


@dataclass
class Correctness:
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict | None = None

    def to_json(self):
        return {"max_relative_error": encode_float(self.max_relative_error),
                "max_absolute_error": encode_float(self.max_absolute_error),
                "extra": None if self.extra is None else {k: encode_float(v) for k, v in self.extra.items()}}


@dataclass
class Performance:
    latency_ms: float = 0.0
    reference_latency_ms: float = 0.0
    speedup_factor: float = 0.0

    def to_json(self):
        """As FIB's model writes it: no inf/NaN-as-strings setting here, so a non-finite value is null."""
        return {k: v if math.isfinite(v) else None for k, v in (
            ("latency_ms", self.latency_ms), ("reference_latency_ms", self.reference_latency_ms),
            ("speedup_factor", self.speedup_factor))}


@dataclass
class Environment:
    hardware: str
    libs: dict[str, str] = field(default_factory=dict)


@dataclass
class Evaluation:
    status: Status
    environment: Environment
    timestamp: str
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None

    def __post_init__(self):
        # The official schema's rule: PASSED has both, INCORRECT_NUMERICAL correctness only, others neither.
        want_c = self.status in (Status.PASSED, Status.INCORRECT_NUMERICAL)
        want_p = self.status == Status.PASSED
        if (self.correctness is not None) != want_c or (self.performance is not None) != want_p:
            raise ValueError(f"evaluation with status {self.status.value} must have correctness="
                             f"{want_c} and performance={want_p}")

    def to_json(self):
        out = {"status": self.status.value,
               "environment": {"hardware": self.environment.hardware, "libs": self.environment.libs},
               "timestamp": self.timestamp, "log": self.log}
        out["correctness"] = self.correctness.to_json() if self.correctness else None
        out["performance"] = self.performance.to_json() if self.performance else None
        return out

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "evaluation")
        status_text = f.req("status", str)
        try:
            status = Status(status_text)
        except ValueError:
            raise DataError(where, f"evaluation: 'status' {status_text!r} is not one of "
                                   f"{[s.value for s in Status]}") from None
        env = f.sub("environment", "evaluation")
        correctness = performance = None
        if f.opt("correctness", dict) is not None:
            c = f.sub("correctness", "evaluation")
            correctness = Correctness(decode_float(c.req("max_relative_error", (int, float, str)), where,
                                                   "correctness.max_relative_error"),
                                      decode_float(c.req("max_absolute_error", (int, float, str)), where,
                                                   "correctness.max_absolute_error"),
                                      c.opt("extra", dict))
        if f.opt("performance", dict) is not None:
            p = f.sub("performance", "evaluation")
            performance = Performance(*(decode_float(p.req(k, (int, float, str)), where, f"performance.{k}")
                                        for k in ("latency_ms", "reference_latency_ms", "speedup_factor")))
        try:
            return cls(status, Environment(env.req("hardware", str), env.opt("libs", dict, {})),
                       f.req("timestamp", str), f.opt("log", str, ""), correctness, performance)
        except ValueError as exc:
            raise DataError(where, str(exc)) from None


@dataclass
class Trace:
    definition: str
    workload: Workload
    solution: str | None
    evaluation: Evaluation | None

    def to_json(self):
        return {"definition": self.definition, "workload": self.workload.to_json(), "solution": self.solution,
                "evaluation": self.evaluation.to_json() if self.evaluation else None}

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "trace")
        ev = f.opt("evaluation", dict)
        return cls(f.req("definition", str), Workload.from_json(f.req("workload", dict), where),
                   f.opt("solution", str), Evaluation.from_json(ev, where) if ev is not None else None)


