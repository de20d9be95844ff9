"""The streamstats client: sessions, batched ingest and questions answered with their bounds.

    from streamstats import Client
    client = Client("127.0.0.1:50051", token="...")
    latency = client.create_session("latency", summaries=["quantiles:epsilon=0.001"])
    latency.ingest(numpy_array)                       # or any iterable of numbers
    for q in latency.quantiles([0.5, 0.99]):
        print(q.phi, q.value, q.rank_lower, q.rank_upper)

Every RPC error is raised as a StreamStatsError (a subclass per common gRPC status code) carrying
the status code and the server's message. Input the server would refuse (NaN, a weight of 0, keys
of the wrong type) is refused here, before anything of the call's batch is sent.
"""
from __future__ import annotations

import array
import datetime
import itertools
import math
import sys
from dataclasses import dataclass, field
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import grpc

from streamstats.v1 import streamstats_pb2 as pb
from streamstats.v1 import streamstats_pb2_grpc as pb_grpc

try:  # optional: arrays are packed without a Python loop
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is optional
    _np = None

__all__ = [
    "Client", "Session", "StreamStatsError", "InvalidArgumentError", "NotFoundError",
    "AlreadyExistsError", "FailedPreconditionError", "PermissionDeniedError",
    "UnauthenticatedError", "ResourceExhaustedError", "UnavailableError", "Quantile", "Quantiles",
    "Rank", "Ranks", "Frequency", "Frequencies", "HeavyHitter", "PrefixHeavyHitter",
    "CorrelatedSum", "CorrelatedSums", "Coverage", "IngestResult", "SessionInfo", "parse_summary",
    "Moments", "Cardinality", "SummaryExport", "MergeResult",
]


# --- Errors -------------------------------------------------------------------------------------

class StreamStatsError(Exception):
    """An RPC failed: `code` is the grpc.StatusCode, `details` the server's message."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgumentError(StreamStatsError, ValueError):
    """INVALID_ARGUMENT: a bad spec, value, φ or support; nothing was changed."""


class NotFoundError(StreamStatsError, KeyError):
    """NOT_FOUND: no such session in the caller's tenant."""

    __str__ = Exception.__str__


class AlreadyExistsError(StreamStatsError):
    """ALREADY_EXISTS: a session of that name exists."""


class FailedPreconditionError(StreamStatsError):
    """FAILED_PRECONDITION: no summary of the session answers the question (yet)."""


class PermissionDeniedError(StreamStatsError, PermissionError):
    """PERMISSION_DENIED: the token's role does not allow the call."""


class UnauthenticatedError(StreamStatsError, PermissionError):
    """UNAUTHENTICATED: no token, or one the server does not know."""


class ResourceExhaustedError(StreamStatsError):
    """RESOURCE_EXHAUSTED: a quota or a message size limit."""


class UnavailableError(StreamStatsError, ConnectionError):
    """UNAVAILABLE: the server is unreachable or shutting down."""


_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
}


def _error(e: grpc.RpcError, prefix: str = "") -> StreamStatsError:
    code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    details = e.details() if callable(getattr(e, "details", None)) else str(e)
    return _ERRORS.get(code, StreamStatsError)(code, prefix + (details or ""))


# --- Answers ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Coverage:
    """Window sessions: what an answer covers (see WindowCoverage in the proto)."""
    window_items: int
    covered_items: int
    uncertain_items: int
    span_seconds: float
    max_error: int

    @staticmethod
    def of(c: "pb.WindowCoverage") -> Optional["Coverage"]:
        if c.window_items == 0 and c.covered_items == 0:
            return None
        return Coverage(c.window_items, c.covered_items, c.uncertain_items, c.span_seconds,
                        c.max_error)


@dataclass(frozen=True)
class Quantile:
    """The φ-quantile: `value` has a rank in [rank_lower, rank_upper], within the bound of
    target_rank = max(1, ⌈φN⌉). float(q) is the value."""
    phi: float
    value: float
    target_rank: int
    rank_lower: int
    rank_upper: int

    def __float__(self) -> float:
        return self.value


class _Answers:
    """A sequence of answers (indexable, iterable, sized) with the facts that hold for all of
    them. (Not a collections.abc.Sequence: its count() would shadow the field N.)"""

    def __getitem__(self, i):  # type: ignore[override]
        return self.answers[i]

    def __len__(self) -> int:
        return len(self.answers)

    def __iter__(self):
        return iter(self.answers)


@dataclass(frozen=True, eq=False)
class Quantiles(_Answers):
    """Answers to a quantile question: N, ε, the rank bound ⌊εN⌋ (window sessions: the window's)
    and one Quantile per φ asked, in order."""
    count: int
    epsilon: float
    max_rank_error: int
    coverage: Optional[Coverage]
    answers: Tuple[Quantile, ...] = field(repr=True, default=())

    def values(self) -> List[float]:
        return [q.value for q in self.answers]


@dataclass(frozen=True)
class Rank:
    """How many items are <= value: in [count_lower, count_upper]; normalized = estimate / N."""
    value: float
    count_lower: int
    count_upper: int
    estimate: float
    normalized: float


@dataclass(frozen=True, eq=False)
class Ranks(_Answers):
    count: int
    epsilon: float
    coverage: Optional[Coverage]
    answers: Tuple[Rank, ...] = ()


@dataclass(frozen=True)
class Frequency:
    """One key's frequency from one summary: lower <= f <= upper, with the summary's guarantee."""
    key: Any
    estimate: int
    lower: int
    upper: int
    summary: str
    guarantee: str


@dataclass(frozen=True, eq=False)
class Frequencies(_Answers):
    """Per summary (in the order the session keeps them), one Frequency per key asked;
    second_moment holds F2 = Σf² as (estimate, lower, upper) when an AMS or Count Sketch
    answered, keyed by summary."""
    count: int
    coverage: Optional[Coverage]
    answers: Tuple[Frequency, ...] = ()
    second_moment: Mapping[str, Tuple[float, float, float]] = field(default_factory=dict)

    def by_summary(self, summary: str) -> List[Frequency]:
        return [f for f in self.answers if f.summary == summary]


@dataclass(frozen=True)
class HeavyHitter(Frequency):
    """A heavy hitter: its frequency interval and the guarantee of the summary that found it,
    with the session's N when asked."""
    count: int


@dataclass(frozen=True)
class PrefixHeavyHitter:
    """A hierarchical heavy hitter: its discounted and total weight as (lower, upper)."""
    prefix: str
    depth: int
    discounted: Tuple[int, int]
    total: Tuple[int, int]


@dataclass(frozen=True)
class CorrelatedSum:
    """Σ y over the items with x <= threshold, within [sum_lower, sum_upper]; for a φ, the
    threshold is an x of rank within [rank_lower, rank_upper]."""
    by_phi: bool
    phi: float
    threshold: float
    sum_estimate: float
    sum_lower: float
    sum_upper: float
    count_lower: int
    count_upper: int
    target_rank: int
    rank_lower: int
    rank_upper: int


@dataclass(frozen=True, eq=False)
class CorrelatedSums(_Answers):
    count: int
    epsilon: float
    y_sum: float
    y_abs_sum: float
    max_sum_error: float
    max_rank_error: int
    guarantee: str
    answers: Tuple[CorrelatedSum, ...] = ()


@dataclass(frozen=True)
class Moments:
    """Exact count, sum, min, max, mean and variance of a numeric session (GetMoments); `complete`
    is False when they cover only part of N (a restore from an older snapshot: see `scope`)."""
    n: int
    count: int
    complete: bool
    sum: float
    min: float
    max: float
    mean: float
    variance: float
    sample_variance: float
    stddev: float
    scope: str


@dataclass(frozen=True)
class Cardinality:
    """Distinct items (HyperLogLog): the estimate, [lower, upper] at `confidence`, the relative
    standard error 1.04/sqrt(m); float(c) is the estimate."""
    n: int
    estimate: float
    lower: float
    upper: float
    rse: float
    confidence: float
    precision: int
    guarantee: str

    def __float__(self) -> float:
        return self.estimate


@dataclass(frozen=True)
class SummaryExport:
    """A session's summaries as one checksummed blob (ExportSummary): `data` is what
    Session.merge (MergeSummaries) takes, from this server or another; bytes(export) is `data`.
    The rest mirrors what it holds: N, the server's log position it reflects, the summaries as
    (kind, parameters, merges) and the producers' highest applied sequences."""
    data: bytes = field(repr=False)
    count: int
    log_position: int
    format_version: int
    summaries: Tuple[Tuple[str, str, bool], ...]
    producers: Tuple[Tuple[str, int], ...]
    raw: Any = field(repr=False, compare=False, default=None)  # the ExportSummaryResponse

    def __bytes__(self) -> bytes:
        return self.data


@dataclass(frozen=True)
class MergeResult:
    count: int          # the session's N after the merge
    merged_count: int   # the export's N
    log_position: int   # the merge's record in the server's log (0: no log)


@dataclass(frozen=True)
class IngestResult:
    items: int    # items acknowledged by this call
    batches: int  # batches sent
    count: int    # the session's N after the last batch


@dataclass(frozen=True)
class SessionInfo:
    name: str
    value_kind: str  # "numeric", "uint64" or "string"
    count: int
    batches: int
    memory_bytes: int
    backend: str
    summaries: Tuple[Tuple[str, str, str], ...]  # (kind, parameters, placement)
    raw: Any = field(repr=False, compare=False, default=None)  # the SessionInfo message

    @staticmethod
    def of(s: "pb.SessionInfo") -> "SessionInfo":
        kind = pb.ValueKind.Name(s.spec.value_kind)[len("VALUE_KIND_"):].lower()
        return SessionInfo(s.spec.name, kind, s.count, s.batches, s.memory_bytes, s.backend,
                           tuple((x.kind, x.parameters, x.placement) for x in s.summaries), s)


# --- Summary specs ------------------------------------------------------------------------------

_KIND_ALIASES = {"hhh": "hierarchical_heavy_hitters", "corrsum": "correlated_sum",
                 "cm": "count_min", "mg": "misra_gries", "lc": "lossy_counting"}
_PARAM_ALIASES = {"window": "window_items", "keys": "expected_keys",
                  "candidates": "heavy_hitter_capacity"}


def parse_summary(spec: Union[str, Mapping[str, Any], "pb.SummarySpec"]) -> "pb.SummarySpec":
    """A SummarySpec from the CLI's text ("quantiles:epsilon=0.001", "hhh:hierarchy=ipv4",
    "pbf:keys=100000,threshold=100", "quantiles:scope=5m" for the last 5 minutes beside all
    history), from {"kind": {param: value}} or {"kind": ..., param: ...}, or a SummarySpec as
    it is. Unknown kinds and parameters are ValueError naming them."""
    if isinstance(spec, pb.SummarySpec):
        return spec
    if isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        params: Dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, eq, value = part.partition("=")
            if not eq:
                raise ValueError(f"summary {spec!r}: parameter {part!r} is not K=V")
            params[key.strip()] = value.strip()
    elif isinstance(spec, Mapping):
        if "kind" in spec:
            params = {k: v for k, v in spec.items() if k != "kind"}
            kind = spec["kind"]
        elif len(spec) == 1:
            kind, params = next(iter(spec.items()))
            params = dict(params or {})
        else:
            raise ValueError(f"summary {spec!r}: give one kind, e.g. {{'quantiles': {{'epsilon': 0.01}}}}")
    else:
        raise TypeError(f"a summary is a string, a mapping or a SummarySpec, not {type(spec).__name__}")
    kind = _KIND_ALIASES.get(kind.strip(), kind.strip())
    out = pb.SummarySpec()
    params = dict(params)
    scope, intervals = params.pop("scope", None), params.pop("intervals", None)
    if scope is not None:
        items, seconds = _last(scope)
        if items > 0:
            out.scope.items = items
        elif seconds > 0:
            out.scope.seconds = seconds
        else:
            raise ValueError(f"summary {kind}: scope={scope!r} is not a window (5m, 300.0, 100000)")
        if intervals is not None:
            out.scope.intervals = int(intervals)
    elif intervals is not None:
        raise ValueError(f"summary {kind}: intervals needs a scope (scope='5m')")
    kinds = {f.name: f for f in pb.SummarySpec.DESCRIPTOR.oneofs_by_name["kind"].fields}
    if kind not in kinds:
        raise ValueError(f"unknown summary kind {kind!r}; one of {', '.join(sorted(kinds))}")
    message = getattr(out, kind)
    message.SetInParent()
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in params.items():
        name = _PARAM_ALIASES.get(key, key)
        if name not in fields:
            raise ValueError(f"summary {kind}: unknown parameter {key!r}; one of "
                             f"{', '.join(sorted(fields))}")
        f = fields[name]
        try:
            if f.enum_type is not None:
                text = str(value).upper()
                prefix = f.enum_type.values[0].name.rsplit("_", 1)[0] + "_"
                value = f.enum_type.values_by_name[text if text.startswith(prefix) else prefix + text].number
            elif f.type == f.TYPE_BOOL:
                if isinstance(value, str):
                    if value.lower() not in ("true", "false", "1", "0"):
                        raise ValueError(value)
                    value = value.lower() in ("true", "1")
                value = bool(value)
            elif f.type in (f.TYPE_DOUBLE, f.TYPE_FLOAT):
                value = float(value)
            else:
                value = int(value)
                if value < 0:
                    raise ValueError(value)
        except (KeyError, ValueError, TypeError):
            raise ValueError(f"summary {kind}: {key}={value!r} is not a valid value") from None
        setattr(message, name, value)
    return out


# --- Packing batches ----------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def _doubles(values: Any) -> bytes:
    """Little-endian IEEE doubles, as the wire's packed repeated double."""
    if _np is not None and isinstance(values, _np.ndarray):
        return values.astype("<f8", copy=False).tobytes()
    a = array.array("d", values)
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def _as_list(data: Any) -> Any:
    if _np is not None and isinstance(data, _np.ndarray):
        return data.ravel()
    if isinstance(data, (list, tuple, range)):
        return data
    return None  # an iterator: read in batches


def _check_finite(values: Any, what: str, offset: int) -> None:
    if _np is not None and isinstance(values, _np.ndarray):
        bad = _np.flatnonzero(~_np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{what} {offset + i} is {values[i]}: only finite numbers are accepted "
                             "(nothing of its batch was sent)")
        return
    for i, v in enumerate(values):
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            raise ValueError(f"{what} {offset + i} is {v!r}: only finite numbers are accepted "
                             "(nothing of its batch was sent)")


def _seconds(t: Union[float, int, datetime.datetime, None]) -> float:
    if t is None:
        return 0.0
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None:
            raise ValueError("event_time: a datetime needs a time zone (e.g. tzinfo=timezone.utc)")
        return t.timestamp()
    return float(t)


def _last(last: Union[int, float, str, datetime.timedelta, None]) -> Tuple[int, float]:
    """last=1000 (items), last="5m" / "300s" / "1h" or a timedelta (seconds)."""
    if last is None:
        return 0, 0.0
    if isinstance(last, datetime.timedelta):
        return 0, last.total_seconds()
    if isinstance(last, int):
        return last, 0.0
    if isinstance(last, float):
        return 0, last
    text = str(last).strip()
    if text.startswith(("items:", "seconds:")):
        kind, _, rest = text.partition(":")
        return (int(rest), 0.0) if kind == "items" else _last(rest if rest[-1:].isalpha() else float(rest))
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text and text[-1] in units:
        return 0, float(text[:-1]) * units[text[-1]]
    return int(text), 0.0


# --- Client and sessions ------------------------------------------------------------------------

class Client:
    """A connection to streamstatsd.

    Client("127.0.0.1:50051"), with token= (sent as "authorization: Bearer TOKEN"), tls_ca=
    (PEM bytes or a path: use TLS and trust these roots), tls_cert= / tls_key= (mutual TLS) and
    timeout= (seconds per question; ingest streams have none). Use it as a context manager, or
    close() it."""

    def __init__(self, address: str = "127.0.0.1:50051", *, token: Optional[str] = None,
                 tls_ca: Union[bytes, str, None] = None, tls_cert: Union[bytes, str, None] = None,
                 tls_key: Union[bytes, str, None] = None, timeout: float = 30.0,
                 max_message_bytes: int = 64 << 20):
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes)]
        if tls_ca is not None:
            read = lambda x: None if x is None else (x if isinstance(x, bytes) else open(x, "rb").read())
            creds = grpc.ssl_channel_credentials(read(tls_ca), read(tls_key), read(tls_cert))
            self._channel = grpc.secure_channel(address, creds, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._stub = pb_grpc.StreamStatsStub(self._channel)
        # Ingest takes bytes packed here (numbers without a per-item Python loop).
        self._ingest = self._channel.stream_stream(
            "/streamstats.v1.StreamStats/Ingest", request_serializer=None,
            response_deserializer=pb.IngestAck.FromString)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _error(e) from None

    def create_session(self, name: str, summaries: Sequence[Any], *, kind: str = "numeric",
                       window: Union[int, float, str, datetime.timedelta, None] = None,
                       intervals: int = 0, partitions: int = 0, partitioning: str = "block",
                       backend: str = "auto", export_quantiles: Sequence[float] = ()) -> "Session":
        """Creates a session: kind "numeric", "uint64" (or "keys") or "string" (or "strings");
        summaries as parse_summary takes them; window=N items or "5m" / seconds as a float /
        a timedelta."""
        spec = pb.SessionSpec(name=name)
        kinds = {"numeric": pb.VALUE_KIND_NUMERIC, "uint64": pb.VALUE_KIND_UINT64,
                 "keys": pb.VALUE_KIND_UINT64, "string": pb.VALUE_KIND_STRING,
                 "strings": pb.VALUE_KIND_STRING}
        if kind not in kinds:
            raise ValueError(f"kind must be one of {', '.join(kinds)}, not {kind!r}")
        spec.value_kind = kinds[kind]
        for s in summaries:
            spec.summaries.append(parse_summary(s))
        backends = {"auto": pb.BACKEND_AUTO, "cpu": pb.BACKEND_CPU, "gpu": pb.BACKEND_GPU}
        if backend not in backends:
            raise ValueError(f"backend must be auto, cpu or gpu, not {backend!r}")
        spec.backend = backends[backend]
        if window is not None:
            items, seconds = _last(window)
            if items:
                spec.window.items = items
            else:
                spec.window.seconds = seconds
            spec.window.intervals = intervals
        if partitions:
            spec.partitioning.partitions = partitions
            spec.partitioning.scheme = (pb.Partitioning.SCHEME_HASH if partitioning == "hash"
                                        else pb.Partitioning.SCHEME_BLOCK)
        spec.export_quantiles.extend(export_quantiles)
        info = self._call("CreateSession", spec)
        return Session(self, name, info.spec.value_kind)

    def health(self, wait: bool = True) -> str:
        """grpc.health.v1.Health/Check for the whole server: "SERVING", "NOT_SERVING", ...
        (what Kubernetes probes ask); wait=True waits for the channel up to the timeout."""
        # HealthCheckRequest{service=""} is zero bytes; the reply's field 1 (status) a varint.
        check = self._channel.unary_unary("/grpc.health.v1.Health/Check",
                                          request_serializer=lambda _: b"",
                                          response_deserializer=lambda b: b)
        try:
            reply = check(None, timeout=self.timeout, wait_for_ready=wait, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _error(e) from None
        status = reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0
        return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}.get(status, str(status))

    def session(self, name: str) -> "Session":
        """A handle on an existing session (no call until it is used)."""
        return Session(self, name)

    def sessions(self) -> List[SessionInfo]:
        return [SessionInfo.of(s) for s in self._call("ListSessions", pb.ListSessionsRequest()).sessions]

    def delete_session(self, name: str) -> None:
        self._call("DeleteSession", pb.DeleteSessionRequest(name=name))


class Session:
    """A session's questions and ingest. Obtain one from Client.create_session or Client.session."""

    def __init__(self, client: Client, name: str, value_kind: Optional[int] = None):
        self._client = client
        self.name = name
        self._kind = value_kind
        self._pairs: Optional[bool] = None  # keeps correlated sums (known after info())

    def __repr__(self) -> str:
        return f"Session({self.name!r})"

    def info(self) -> SessionInfo:
        info = self._client._call("GetSession", pb.GetSessionRequest(name=self.name))
        self._kind = info.spec.value_kind
        self._pairs = any(s.HasField("correlated_sum") for s in info.spec.summaries)
        return SessionInfo.of(info)

    def delete(self) -> None:
        self._client.delete_session(self.name)

    @property
    def count(self) -> int:
        """N: the total weight ingested."""
        return self.info().count

    # -- ingest --

    def ingest(self, data: Iterable[Any], weights: Optional[Iterable[int]] = None, *,
               y: Optional[Iterable[float]] = None, batch_size: int = 65536,
               producer_id: str = "", first_sequence: int = 1,
               event_time: Union[float, datetime.datetime, None] = None) -> IngestResult:
        """Streams `data` (a numpy array, a list or any iterable: numbers for numeric sessions,
        ints for uint64, str or bytes for string sessions) in batches of batch_size, with one
        weight >= 1 per item if `weights` is given and one y per item for correlated sums.
        Returns once every batch is acknowledged. A bad item raises ValueError before its batch
        is sent (earlier batches of an iterator stay applied); a batch the server refuses raises
        its StreamStatsError, with the items acknowledged before it in the message.
        producer_id and first_sequence make resends idempotent (see IngestRequest)."""
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self._kind is None or self._pairs is None:
            self.info()
        kind, pairs = self._kind, self._pairs
        if pairs and y is None:
            raise ValueError(f"session {self.name!r} keeps correlated sums: pass y= (one per item)")
        if y is not None and not pairs:
            raise ValueError(f"session {self.name!r} keeps no correlated sums: y= is not for it")
        when = _seconds(event_time)
        header = pb.IngestRequest(session=self.name, producer_id=producer_id,
                                  event_time_unix_s=when)
        # Materialized input is checked whole first: nothing is sent if any item is bad.
        items = _as_list(data)
        if items is not None:
            for extra, what in ((weights, "weights"), (y, "y")):
                seq = _as_list(extra) if extra is not None else None
                if seq is not None and len(seq) != len(items):
                    raise ValueError(f"{what}: {len(seq)} for {len(items)} items; give one per item")
            if kind == pb.VALUE_KIND_NUMERIC:
                _check_finite(items, "item", 0)
        failure: List[BaseException] = []
        sent = [0]

        def requests() -> Iterator[bytes]:
            # A bad batch ends the stream here (grpc would only log an exception raised in this
            # thread): the batches before it are acknowledged, then ingest raises it.
            try:
                for i, (chunk, w, ys) in enumerate(self._batches(data, weights, y, batch_size)):
                    request = self._pack(header, first_sequence + i, kind, chunk, w, ys, i * batch_size)
                    sent[0] = i + 1
                    yield request
            except (ValueError, TypeError) as e:
                failure.append(e)

        call = self._client._ingest(requests(), metadata=self._client._metadata)
        last = None
        try:
            for ack in call:
                last = ack
        except grpc.RpcError as e:
            done = last.items_applied if last is not None else 0
            raise _error(e, f"{done} items acknowledged before: ") from None
        if failure:
            done = last.items_applied if last is not None else 0
            raise type(failure[0])(f"{failure[0]} ({sent[0]} batches, {done} items sent and "
                                   "acknowledged before it)") from failure[0]
        if last is None:
            return IngestResult(0, 0, self.count)
        return IngestResult(last.items_applied, sent[0], last.count)

    @staticmethod
    def _batches(data, weights, ys, size) -> Iterator[Tuple[Any, Any, Any]]:
        """(items, weights or None, ys or None) in batches of `size`; unequal lengths are a
        ValueError at the batch where they part."""
        def chunks(x):
            seq = _as_list(x)
            if seq is not None:
                return (seq[i:i + size] for i in range(0, len(seq), size))
            it = iter(x)
            return iter(lambda: list(itertools.islice(it, size)), [])

        given = [(name, x) for name, x in (("weights", weights), ("y", ys)) if x is not None]
        streams = [chunks(data)] + [chunks(x) for _, x in given]
        for n, parts in enumerate(itertools.zip_longest(*streams)):
            for (name, _), part in zip(given, parts[1:]):
                items = 0 if parts[0] is None else len(parts[0])
                if part is None or len(part) != items:
                    raise ValueError(f"{name}: {0 if part is None else len(part)} for the {items} "
                                     f"items of batch {n}; give one per item")
            if parts[0] is None:
                return
            extra = dict(zip((name for name, _ in given), parts[1:]))
            yield parts[0], extra.get("weights"), extra.get("y")

    @staticmethod
    def _pack(header, sequence, kind, chunk, weights, ys, offset) -> bytes:
        """One IngestRequest's bytes: the header fields through protobuf, the numbers packed
        directly (concatenated fields are one message on the wire)."""
        request = pb.IngestRequest()
        request.CopyFrom(header)
        request.sequence = sequence
        tail = b""
        if kind == pb.VALUE_KIND_NUMERIC:
            _check_finite(chunk, "item", offset)
            tail = _length_delimited(3, _length_delimited(1, _doubles(chunk)))
        elif kind == pb.VALUE_KIND_UINT64:
            keys = chunk.tolist() if _np is not None and isinstance(chunk, _np.ndarray) else list(chunk)
            for i, k in enumerate(keys):
                if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 1 << 64:
                    raise ValueError(f"item {offset + i} is {k!r}: keys of this session are "
                                     "unsigned 64-bit integers (nothing of its batch was sent)")
            request.keys.keys.extend(keys)
        else:
            keys = []
            for i, k in enumerate(chunk):
                if isinstance(k, str):
                    k = k.encode()
                if not isinstance(k, bytes):
                    raise ValueError(f"item {offset + i} is {k!r}: keys of this session are str "
                                     "or bytes (nothing of its batch was sent)")
                keys.append(k)
            request.strings.keys.extend(keys)
        if weights is not None:
            w = weights.tolist() if _np is not None and isinstance(weights, _np.ndarray) else list(weights)
            for i, x in enumerate(w):
                if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                    raise ValueError(f"weight {offset + i} is {x!r}: weights are integers >= 1 "
                                     "(nothing of its batch was sent)")
            request.weights.extend(w)
        if ys is not None:
            _check_finite(ys, "y", offset)
            tail += _length_delimited(9, _doubles(ys))
        return request.SerializeToString() + tail

    # -- questions --

    def quantiles(self, phis: Iterable[float], *, last=None) -> Quantiles:
        """The φ-quantiles, each with its rank interval; last= (window sessions) asks about the
        last N items (an int) or seconds ("5m", a float, a timedelta)."""
        items, seconds = _last(last)
        r = self._client._call("GetQuantiles", pb.GetQuantilesRequest(
            session=self.name, phis=list(phis), last_items=items, last_seconds=seconds))
        return Quantiles(r.count, r.epsilon, r.max_rank_error, Coverage.of(r.coverage), tuple(
            Quantile(q.phi, q.value, q.target_rank, q.rank_lower, q.rank_upper) for q in r.quantiles))

    def quantile(self, phi: float, *, last=None) -> float:
        """One quantile's value (its bound: quantiles([phi]))."""
        return self.quantiles([phi], last=last)[0].value

    def ranks(self, values: Iterable[float], *, last=None) -> Ranks:
        """The count of items <= each value, as an interval, and the CDF estimate."""
        items, seconds = _last(last)
        r = self._client._call("GetRanks", pb.GetRanksRequest(
            session=self.name, values=list(values), last_items=items, last_seconds=seconds))
        return Ranks(r.count, r.epsilon, Coverage.of(r.coverage), tuple(
            Rank(x.value, x.count_lower, x.count_upper, x.estimate, x.normalized) for x in r.ranks))

    def _keys(self, request, keys: Sequence[Any]) -> None:
        if self._kind is None:
            self.info()
        if self._kind == pb.VALUE_KIND_NUMERIC:
            request.values.values.extend(float(k) for k in keys)
        elif self._kind == pb.VALUE_KIND_UINT64:
            request.uint64_keys.keys.extend(int(k) for k in keys)
        else:
            request.strings.keys.extend(k.encode() if isinstance(k, str) else k for k in keys)

    def frequencies(self, keys: Iterable[Any] = (), *, summary: str = "", last=None) -> Frequencies:
        """Each key's frequency from each frequency summary (or the one named); no keys: the
        second moment F2 alone (AMS, Count Sketch)."""
        keys = list(keys)
        items, seconds = _last(last)
        request = pb.GetFrequenciesRequest(session=self.name, summary=summary, last_items=items,
                                           last_seconds=seconds)
        self._keys(request, keys)
        r = self._client._call("GetFrequencies", request)
        out, moments = [], {}
        for s in r.results:
            for k, f in zip(keys, s.frequencies):
                out.append(Frequency(k, f.estimate, f.lower, f.upper, s.summary, s.guarantee))
            if s.HasField("second_moment"):
                m = s.second_moment
                moments[s.summary] = (m.estimate, m.lower, m.upper)
        return Frequencies(r.count, Coverage.of(r.coverage), tuple(out), moments)

    def heavy_hitters(self, support: float, *, summary: str = "", last=None) -> Iterator[HeavyHitter]:
        """Iterates the items of frequency >= support·N (by estimate, descending), each with its
        interval; the guarantee is the answering summary's."""
        items, seconds = _last(last)
        r = self._client._call("GetHeavyHitters", pb.GetHeavyHittersRequest(
            session=self.name, support=support, summary=summary, last_items=items,
            last_seconds=seconds))
        for h in r.items:
            which = h.WhichOneof("key")
            key = getattr(h, which) if which else None
            if which == "string_key":
                try:
                    key = key.decode()
                except UnicodeDecodeError:
                    pass
            f = h.frequency
            yield HeavyHitter(key, f.estimate, f.lower, f.upper, r.summary, r.guarantee, r.count)

    def hierarchical_heavy_hitters(self, phi: float, *, prefix: str = "",
                                   max_depth: Optional[int] = None) -> Iterator[PrefixHeavyHitter]:
        """Iterates the prefixes whose discounted weight may reach φN (hhh summaries)."""
        request = pb.GetHierarchicalHeavyHittersRequest(session=self.name, phi=phi, prefix=prefix)
        if max_depth is not None:
            request.max_depth = max_depth
        r = self._client._call("GetHierarchicalHeavyHitters", request)
        for p in r.prefixes:
            yield PrefixHeavyHitter(p.prefix, p.depth, (p.discounted.lower, p.discounted.upper),
                                    (p.total.lower, p.total.upper))

    def moments(self) -> Moments:
        """Exact moments of a numeric session (every numeric session keeps them)."""
        r = self._client._call("GetMoments", pb.GetMomentsRequest(session=self.name))
        return Moments(r.n, r.count, r.complete, r.sum, r.min, r.max, r.mean, r.variance,
                       r.sample_variance, r.stddev, r.scope)

    def distinct(self) -> Cardinality:
        """The distinct count of a session keeping an hll summary."""
        r = self._client._call("GetCardinality", pb.GetCardinalityRequest(session=self.name))
        return Cardinality(r.n, r.estimate, r.lower, r.upper, r.rse, r.confidence, r.precision,
                           r.guarantee)

    def export(self) -> SummaryExport:
        """The session's summaries, N and log position as one blob, at a consistent cut."""
        r = self._client._call("ExportSummary", pb.ExportSummaryRequest(session=self.name))
        return SummaryExport(r.summary_export, r.count, r.log_position, r.format_version,
                             tuple((x.kind, x.parameters, x.merges) for x in r.summaries),
                             tuple((p.producer_id, p.sequence) for p in r.producers), r)

    def merge(self, export: Union[SummaryExport, bytes]) -> MergeResult:
        """Merges an export (of a session with the same summaries and parameters) into this
        session, all or nothing: InvalidArgumentError for bytes that are not an export,
        FailedPreconditionError for other summaries or ones that do not merge (fcm, pbf,
        windows)."""
        r = self._client._call("MergeSummaries", pb.MergeSummariesRequest(
            session=self.name, summary_export=bytes(export)))
        return MergeResult(r.count, r.merged_count, r.log_position)

    def correlated_sums(self, values: Iterable[float] = (), phis: Iterable[float] = ()) -> CorrelatedSums:
        """Σ y over the items with x <= each value, then over x <= each φ-quantile of x."""
        r = self._client._call("GetCorrelatedSums", pb.GetCorrelatedSumsRequest(
            session=self.name, values=list(values), phis=list(phis)))
        return CorrelatedSums(r.count, r.epsilon, r.y_sum, r.y_abs_sum, r.max_sum_error,
                              r.max_rank_error, r.guarantee, tuple(
            CorrelatedSum(s.by_phi, s.phi, s.threshold, s.sum_estimate, s.sum_lower, s.sum_upper,
                          s.count_lower, s.count_upper, s.target_rank, s.rank_lower, s.rank_upper)
            for s in r.sums))
