#!/usr/bin/env python3
"""A streamstats client in Python: create a session, stream values in, ask for quantiles.

Uses the streamstats package (python/ in this repository; pip install ./python builds it from
proto/ with Debian's protoc and grpc_python_plugin, and runs on python3-grpcio/protobuf):

  pip install --no-build-isolation ./python      # see python/README.md
  examples/python/streamstats_client.py --server=127.0.0.1:50051

What it does, in order:
  1. asks grpc.health.v1.Health whether the server is SERVING (the same check Kubernetes probes use);
  2. creates a numeric session keeping an epsilon-approximate quantile summary;
  3. ingests --count values in batches of --batch (one stream, sequence numbers, a producer id);
  4. asks for the quantiles of --phis and prints each answer beside its guarantee, and with --check
     verifies that guarantee against the exact ranks (the client still has every value it sent);
  5. deletes the session, unless --keep.

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

try:
    import streamstats
except ImportError as e:
    sys.exit(f"streamstats_client: {e}\n  install the package: pip install --no-build-isolation ./python")


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

    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    values = make_values(args.values, args.count, random.Random(args.seed))
    with streamstats.Client(args.server, token=args.token, tls_ca=args.tls_ca,
                            timeout=args.timeout) as client:
        try:
            log(f"server {args.server}: {client.health()}")
            if args.replace:
                try:
                    client.delete_session(args.session)
                except streamstats.NotFoundError:
                    pass
            session = client.create_session(args.session, [f"quantiles:epsilon={args.epsilon}"])
            info = session.info()
            log(f"created session {info.name!r}: "
                f"{', '.join(f'{kind}({params})' for kind, params, _ in info.summaries)} on {info.backend or 'cpu'}")
            start = time.monotonic()
            result = session.ingest(values, batch_size=args.batch, producer_id=f"python-example-{os.getpid()}")
            elapsed = time.monotonic() - start
            if result.items != len(values):
                print(f"streamstats_client: ingest ended early: {result}", file=sys.stderr)
                return 1
            log(f"ingested {result.items} values in {result.batches} batches in {elapsed:.2f} s "
                f"({result.items / max(elapsed, 1e-9):,.0f} values/s); session N = {result.count}")
            ans = session.quantiles(phis)
        except streamstats.StreamStatsError as e:
            print(f"streamstats_client: {e}", file=sys.stderr)
            return 1

        exact = sorted(values)
        violations = 0
        rows = []
        for q in ans:
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
                session.delete()
            except streamstats.StreamStatsError as e:
                print(f"streamstats_client: delete: {e}", file=sys.stderr)
                return 1
    if args.check and violations:
        print(f"streamstats_client: {violations} answer(s) outside the epsilon*N rank bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
