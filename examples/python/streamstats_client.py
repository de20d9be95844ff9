#!/usr/bin/env python3
"""A streamstats client in Python: create a session, stream values in, ask for quantiles.

Uses only Debian's python3-grpcio and python3-protobuf, with stubs generated from proto/ by the
system protoc and grpc_python_plugin (see gen_stubs.sh and README.md next to this file):

  examples/python/gen_stubs.sh /tmp/ss-stubs
  examples/python/streamstats_client.py --stubs=/tmp/ss-stubs --server=127.0.0.1:50051

What it does, in order:
  1. asks grpc.health.v1.Health whether the server is SERVING (the same check Kubernetes probes use);
  2. CreateSession: a numeric session keeping an epsilon-approximate quantile summary;
  3. Ingest: one bidirectional stream of --count values in batches of --batch, each batch carrying a
     sequence number; reads the acks (the server coalesces them) and checks the last one;
  4. GetQuantiles for --phis and prints each answer beside its guarantee, and with --check verifies
     that guarantee against the exact ranks (the client still has every value it sent);
  5. DeleteSession, unless --keep.

Authentication: --token (or $STREAMSTATS_TOKEN) is sent as `authorization: Bearer TOKEN`; --tls-ca
switches to TLS. Exit status: 0 success, 1 an RPC failed or --check found a violation, 2 usage.
"""

import argparse
import bisect
import json
import math
import os
import random
import sys
import time
from fractions import Fraction


def import_stubs(stubs_dir):
    if stubs_dir:
        sys.path.insert(0, os.path.abspath(stubs_dir))
    try:
        import grpc  # noqa: F401  (python3-grpcio)
        from streamstats.v1 import streamstats_pb2, streamstats_pb2_grpc
    except ImportError as e:
        sys.exit(f"streamstats_client: {e}\n"
                 "  needs python3-grpcio and python3-protobuf, and stubs generated with\n"
                 "  examples/python/gen_stubs.sh DIR, passed as --stubs=DIR (or $STREAMSTATS_PY_STUBS)")
    return streamstats_pb2, streamstats_pb2_grpc


def health_check(grpc, channel, timeout):
    """grpc.health.v1.Health/Check for the whole server, without the grpcio-health-checking package.

    HealthCheckRequest{service=""} encodes as zero bytes; the response's field 1 (status) is a
    varint, 1 = SERVING.
    """
    check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                request_serializer=lambda _: b"",
                                response_deserializer=lambda b: b)
    reply = check(None, timeout=timeout, wait_for_ready=True)
    status = reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0
    return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}.get(status, str(status))


def make_values(kind, n, rng):
    if kind == "permutation":  # 1..n shuffled: the value of rank r is r, which makes checking easy
        values = [float(i) for i in range(1, n + 1)]
        rng.shuffle(values)
        return values
    if kind == "uniform":
        return [rng.uniform(0.0, 100.0) for _ in range(n)]
    if kind == "normal":
        return [rng.gauss(100.0, 15.0) for _ in range(n)]
    # "latency": log-normal milliseconds with a long tail, like request latencies
    return [rng.lognormvariate(3.0, 0.6) for _ in range(n)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=os.environ.get("STREAMSTATS_SERVER", "127.0.0.1:50051"))
    ap.add_argument("--token", default=os.environ.get("STREAMSTATS_TOKEN"),
                    help="bearer token (default: $STREAMSTATS_TOKEN; none for an unauthenticated local server)")
    ap.add_argument("--tls-ca", help="PEM file of the CA that signed the server's certificate (enables TLS)")
    ap.add_argument("--stubs", default=os.environ.get("STREAMSTATS_PY_STUBS"),
                    help="directory holding the generated streamstats/v1/*_pb2*.py")
    ap.add_argument("--session", default="python-example")
    ap.add_argument("--replace", action="store_true", help="delete the session first if it exists")
    ap.add_argument("--keep", action="store_true", help="do not delete the session at the end")
    ap.add_argument("--epsilon", type=float, default=0.001)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--values", choices=["latency", "normal", "uniform", "permutation"], default="latency")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--phis", default="0.5,0.9,0.99,0.999")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per RPC")
    ap.add_argument("--check", action="store_true",
                    help="verify every answer against the exact ranks of the values sent; exit 1 if one is off")
    ap.add_argument("--json", action="store_true", help="print the answer as JSON")
    args = ap.parse_args(argv)
    try:
        phis = [float(p) for p in args.phis.split(",") if p]
    except ValueError:
        ap.error(f"--phis must be numbers separated by commas, got {args.phis!r}")
    if args.count < 1 or args.batch < 1:
        ap.error("--count and --batch must be >= 1")

    pb, pb_grpc = import_stubs(args.stubs)
    import grpc

    if args.tls_ca:
        with open(args.tls_ca, "rb") as f:
            channel = grpc.secure_channel(args.server, grpc.ssl_channel_credentials(root_certificates=f.read()))
    else:
        channel = grpc.insecure_channel(args.server)
    metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
    stub = pb_grpc.StreamStatsStub(channel)
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    try:
        log(f"server {args.server}: {health_check(grpc, channel, args.timeout)}")

        # 1. The session: numeric values, one quantile summary.
        spec = pb.SessionSpec(
            name=args.session, value_kind=pb.VALUE_KIND_NUMERIC,
            summaries=[pb.SummarySpec(quantiles=pb.QuantilesSpec(epsilon=args.epsilon))])
        if args.replace:
            try:
                stub.DeleteSession(pb.DeleteSessionRequest(name=args.session), metadata=metadata,
                                   timeout=args.timeout)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
        info = stub.CreateSession(spec, metadata=metadata, timeout=args.timeout)
        log(f"created session {info.spec.name!r}: {', '.join(f'{s.kind}({s.parameters})' for s in info.summaries)}"
            f" on {info.backend or 'cpu'}")

        # 2. Ingest: one stream, batches with increasing sequence numbers.
        values = make_values(args.values, args.count, random.Random(args.seed))
        batches = [values[i:i + args.batch] for i in range(0, len(values), args.batch)]
        producer = f"python-example-{os.getpid()}"

        def requests():
            for seq, chunk in enumerate(batches, start=1):
                yield pb.IngestRequest(session=args.session, sequence=seq, producer_id=producer,
                                       values=pb.DoubleValues(values=chunk))

        start = time.monotonic()
        last = None
        acks = 0
        for ack in stub.Ingest(requests(), metadata=metadata, timeout=max(args.timeout, 1e-5 * args.count)):
            last, acks = ack, acks + 1
        elapsed = time.monotonic() - start
        if last is None or last.sequence != len(batches) or last.items_applied != len(values):
            print(f"streamstats_client: ingest ended early: last ack {last}", file=sys.stderr)
            return 1
        log(f"ingested {last.items_applied} values in {len(batches)} batches ({acks} acks) in {elapsed:.2f} s "
            f"({last.items_applied / max(elapsed, 1e-9):,.0f} values/s); session N = {last.count}")

        # 3. Quantiles.
        ans = stub.GetQuantiles(pb.GetQuantilesRequest(session=args.session, phis=phis), metadata=metadata,
                                timeout=args.timeout)
    except grpc.RpcError as e:
        print(f"streamstats_client: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1

    exact = sorted(values)
    violations = 0
    rows = []
    for q in ans.quantiles:
        # Exact ranks the answered value can have among what we sent: [lo, hi] (1-based).
        lo, hi = bisect.bisect_left(exact, q.value) + 1, bisect.bisect_right(exact, q.value)
        target = max(1, math.ceil(Fraction(q.phi) * len(exact)))  # exact: phi as the double it is
        ok = hi >= lo and lo <= target + ans.max_rank_error and hi >= target - ans.max_rank_error
        violations += 0 if ok else 1
        rows.append({"phi": q.phi, "value": q.value, "target_rank": q.target_rank,
                     "rank_lower": q.rank_lower, "rank_upper": q.rank_upper,
                     "exact_rank_lower": lo, "exact_rank_upper": hi, "within_bound": ok})

    if args.json:
        print(json.dumps({"session": args.session, "count": ans.count, "epsilon": ans.epsilon,
                          "max_rank_error": ans.max_rank_error, "quantiles": rows}, indent=2))
    else:
        print(f"\nN = {ans.count}, epsilon = {ans.epsilon:g}: each rank within {ans.max_rank_error} of its target")
        print(f"{'phi':>7} {'value':>14} {'target rank':>12} {'guaranteed rank':>23} {'exact rank':>19}")
        for r in rows:
            print(f"{r['phi']:>7g} {r['value']:>14.6g} {r['target_rank']:>12} "
                  f"{'[%d, %d]' % (r['rank_lower'], r['rank_upper']):>23} "
                  f"{'[%d, %d]' % (r['exact_rank_lower'], r['exact_rank_upper']):>19}"
                  f"{'' if r['within_bound'] else '  OUTSIDE THE BOUND'}")

    if not args.keep:
        try:
            stub.DeleteSession(pb.DeleteSessionRequest(name=args.session), metadata=metadata, timeout=args.timeout)
        except grpc.RpcError as e:
            print(f"streamstats_client: DeleteSession: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    channel.close()
    if args.check and violations:
        print(f"streamstats_client: {violations} answer(s) outside the epsilon*N rank bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
