"""The streamstats Python package against a real streamstatsd (ctest python_client).

Run by tests/deploy/python_client_test.sh with the package installed in a venv and the server's
address in $STREAMSTATS_SERVER and its token in $STREAMSTATS_TOKEN. Every answer is checked
against the exact answer the test computes from what it sent, within the stated bound.
"""
import itertools
import math
import os
import random
import unittest
from fractions import Fraction

import streamstats

try:
    import numpy as np
except ImportError:  # numpy is optional for the package; the array tests then skip
    np = None

SERVER = os.environ["STREAMSTATS_SERVER"]
TOKEN = os.environ.get("STREAMSTATS_TOKEN")


def exact_rank_range(sorted_values, v):
    """The 1-based ranks v has among sorted_values (weights expanded): [lo, hi]."""
    import bisect
    return bisect.bisect_left(sorted_values, v) + 1, bisect.bisect_right(sorted_values, v)


class PythonClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = streamstats.Client(SERVER, token=TOKEN, timeout=30)
        cls.names = itertools.count()

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def session(self, summaries, **kw):
        name = f"py-{self._testMethodName[:40]}-{next(self.names)}"
        return self.client.create_session(name, summaries, **kw)

    def assert_quantiles_within_bound(self, s, values, phis):
        exact = sorted(values)
        ans = s.quantiles(phis)
        self.assertEqual(ans.count, len(exact))
        self.assertEqual(ans.max_rank_error, math.floor(ans.epsilon * len(exact)))
        self.assertEqual(len(ans), len(phis))
        for q, phi in zip(ans, phis):
            self.assertEqual(q.phi, phi)
            lo, hi = exact_rank_range(exact, q.value)
            self.assertLessEqual(lo, hi, f"{q.value} was never sent")
            target = max(1, math.ceil(Fraction(phi) * len(exact)))
            self.assertIn(q.target_rank, {target, max(1, math.ceil(phi * len(exact)))})
            # Some rank of the value lies in the answer's interval, itself within the bound.
            self.assertTrue(lo <= q.rank_upper and hi >= q.rank_lower, (q, lo, hi))
            self.assertGreaterEqual(q.rank_lower, q.target_rank - ans.max_rank_error)
            self.assertLessEqual(q.rank_upper, q.target_rank + ans.max_rank_error)
        return ans

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")

    def test_lists_and_iterators_answer_within_the_bound(self):
        rng = random.Random(7)
        values = [rng.lognormvariate(3, 0.7) for _ in range(30000)]
        s = self.session(["quantiles:epsilon=0.005"])
        r = s.ingest(values, batch_size=4096)
        self.assertEqual((r.items, r.batches, r.count), (30000, 8, 30000))
        self.assert_quantiles_within_bound(s, values, [0, 0.01, 0.5, 0.9, 0.99, 1])
        # An iterator (a generator) in batches, sorted input (an adversarial order).
        more = sorted(rng.uniform(0, 1000) for _ in range(20000))
        r = s.ingest(iter(more), batch_size=3000)
        self.assertEqual((r.items, r.batches, r.count), (20000, 7, 50000))
        self.assert_quantiles_within_bound(s, values + more, [0.25, 0.5, 0.75])
        self.assertEqual(s.count, 50000)

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_numpy_arrays_and_weights(self):
        perm = np.random.default_rng(11).permutation(np.arange(1, 100001, dtype=np.float64))
        s = self.session([{"quantiles": {"epsilon": 0.001}}])
        self.assertEqual(s.ingest(perm).items, 100000)
        ans = self.assert_quantiles_within_bound(s, perm.tolist(), [0.001, 0.5, 0.999])
        # A permutation of 1..N: the value of rank r is r.
        for q in ans:
            self.assertLessEqual(abs(q.value - q.target_rank), ans.max_rank_error)
        ranks = s.ranks([1000.0, 50000.5])
        for r, true in zip(ranks, [1000, 50000]):
            self.assertLessEqual(r.count_lower, true)
            self.assertGreaterEqual(r.count_upper, true)
        # Integer arrays and weights: value v counted w[v] times, exact with a tiny epsilon.
        k = self.session(["quantiles:epsilon=0.0001"])
        v = np.arange(1, 1001, dtype=np.int64)
        w = (v % 5 + 1).astype(np.uint64)
        r = k.ingest(v, weights=w, batch_size=300)
        self.assertEqual(r.count, int(w.sum()))
        median = k.quantiles([0.5])[0]
        cum = np.cumsum(w)
        self.assertEqual(median.value, float(v[np.searchsorted(cum, math.ceil(0.5 * cum[-1]))]))

    def test_bad_input_is_refused_before_anything_is_sent(self):
        s = self.session(["quantiles"])
        s.ingest([1.0, 2.0])
        for bad, what in (([3.0, float("nan")], "nan"), ([3.0, float("inf")], "inf"),
                          (["x"], "'x'")):
            with self.assertRaises(ValueError) as e:
                s.ingest(bad)
            self.assertIn(what, str(e.exception))
        with self.assertRaisesRegex(ValueError, "weights are integers >= 1"):
            s.ingest([1.0, 2.0], weights=[1, 0])
        with self.assertRaisesRegex(ValueError, "weights: 1 for 2 items"):
            s.ingest([1.0, 2.0], weights=[1])
        with self.assertRaisesRegex(ValueError, "keeps no correlated sums"):
            s.ingest([1.0], y=[2.0])
        self.assertEqual(s.count, 2)
        keys = self.session(["misra_gries:k=10"], kind="uint64")
        for bad in ([1, -1], [1, 2**64], [1, 1.5], [1, "2"]):
            with self.assertRaisesRegex(ValueError, "unsigned 64-bit"):
                keys.ingest(bad)
        self.assertEqual(keys.count, 0)
        # An iterator: the batches before a bad one stay (they were acknowledged), the rest not.
        with self.assertRaisesRegex(ValueError, r"item 5 is nan.*2 batches, 4 items sent and acknowledged"):
            s.ingest(iter([1.0, 2.0, 3.0, 4.0, 5.0, float("nan"), 7.0]), batch_size=2)
        self.assertEqual(s.count, 6)

    def test_errors_carry_the_grpc_status(self):
        s = self.session(["quantiles"])
        with self.assertRaises(streamstats.NotFoundError) as e:
            self.client.session("no-such-session").quantiles([0.5])
        self.assertEqual(e.exception.code.name, "NOT_FOUND")
        self.assertIn("no-such-session", e.exception.details)
        with self.assertRaises(streamstats.AlreadyExistsError):
            self.client.create_session(s.name, ["quantiles"])
        with self.assertRaises(streamstats.FailedPreconditionError):
            s.quantiles([0.5])  # empty
        s.ingest([1.0])
        with self.assertRaises(streamstats.InvalidArgumentError):
            s.quantiles([1.5])
        with self.assertRaises(streamstats.InvalidArgumentError):
            self.client.create_session("py-bad-epsilon", ["quantiles:epsilon=2"])
        with self.assertRaisesRegex(ValueError, "unknown summary kind 'quantile'"):
            streamstats.parse_summary("quantile")
        with self.assertRaisesRegex(ValueError, "unknown parameter 'eps'"):
            streamstats.parse_summary("quantiles:eps=0.1")
        with self.assertRaisesRegex(ValueError, "not a valid value"):
            streamstats.parse_summary("count_min:conservative=maybe")
        if TOKEN:
            with self.assertRaises(streamstats.UnauthenticatedError):
                streamstats.Client(SERVER, token="wrong-" + TOKEN).sessions()
            with self.assertRaises(streamstats.UnauthenticatedError):
                streamstats.Client(SERVER).sessions()

    def test_parse_summary_matches_the_cli_spellings(self):
        spec = streamstats.parse_summary("hhh:hierarchy=ipv4,epsilon=0.01,window=5000")
        self.assertEqual(spec.hierarchical_heavy_hitters.hierarchy, 1)
        self.assertEqual(spec.hierarchical_heavy_hitters.window_items, 5000)
        spec = streamstats.parse_summary("pbf:keys=1000,threshold=50,candidates=64")
        self.assertEqual((spec.pbf.expected_keys, spec.pbf.threshold, spec.pbf.heavy_hitter_capacity),
                         (1000, 50, 64))
        spec = streamstats.parse_summary({"kind": "count_min", "conservative": True, "epsilon": 0.01})
        self.assertTrue(spec.count_min.conservative)
        self.assertTrue(spec.count_min.HasField("epsilon"))

    def test_all_history_and_the_recent_past_in_one_session(self):
        s = self.session(["quantiles:epsilon=0.001", "quantiles:epsilon=0.01,scope=1000",
                          {"count_min": {"scope": "1m", "intervals": 6}}, "count_min"])
        for b in range(120):  # value b for 100 items, stamped second b
            s.ingest([float(b)] * 100, event_time=1e9 + b)
        self.assertEqual(s.quantiles([0])[0].value, 0)                       # all history
        self.assertEqual(s.quantiles([0], last=500)[0].value, 115)           # the last 500 items
        recent = s.frequencies([5, 110], summary="count_min", last="30s")
        self.assertEqual([f.estimate for f in recent], [0, 100])             # expired, recent
        self.assertIsNotNone(recent.coverage)
        self.assertGreaterEqual(s.frequencies([5], summary="count_min")[0].estimate, 100)
        with self.assertRaises(streamstats.InvalidArgumentError):
            s.quantiles([0.5], last="1h")                                    # no scope covers it
        spec = streamstats.parse_summary("misra_gries:k=5,scope=90s,intervals=9")
        self.assertEqual((spec.scope.seconds, spec.scope.intervals), (90, 9))

    def test_heavy_hitters_and_frequencies_of_string_keys(self):
        rng = random.Random(3)
        keys = [f"k{min(int(rng.paretovariate(1.1)), 5000)}" for _ in range(40000)]
        s = self.session(["lossy_counting:epsilon=0.001", "count_min:epsilon=0.001,delta=0.01"],
                         kind="strings")
        s.ingest(keys)
        truth = {}
        for k in keys:
            truth[k] = truth.get(k, 0) + 1
        n, support = len(keys), 0.01
        got = list(s.heavy_hitters(support, summary="lossy_counting"))
        listed = {h.key for h in got}
        for k, f in truth.items():
            if f >= support * n:
                self.assertIn(k, listed)  # every f >= sN
        for h in got:
            self.assertIsInstance(h.key, str)
            self.assertGreaterEqual(truth[h.key], (support - 0.001) * n)  # none below (s - eps)N
            self.assertTrue(h.lower <= truth[h.key] <= h.upper, h)
            self.assertEqual(h.count, n)
        self.assertEqual([h.estimate for h in got], sorted((h.estimate for h in got), reverse=True))
        freq = s.frequencies(["k1", "k2", "absent"])
        self.assertEqual({f.summary for f in freq}, {"lossy_counting", "count_min"})
        for f in freq:
            self.assertTrue(f.lower <= truth.get(f.key, 0) <= f.upper, f)
        self.assertEqual(len(freq.by_summary("count_min")), 3)

    def test_uint64_keys_second_moment_and_windows(self):
        s = self.session(["ams:epsilon=0.05,delta=0.01", "count_sketch:epsilon=0.05"], kind="uint64")
        keys = [i % 100 for i in range(10000)] + [2**64 - 1] * 500
        s.ingest(keys, batch_size=1000)
        f2 = sum(c * c for c in [100] * 100 + [500])
        moments = s.frequencies().second_moment
        self.assertEqual(set(moments), {"ams", "count_sketch"})
        est, lo, hi = moments["ams"]
        self.assertLessEqual(abs(est - f2), 0.05 * f2)  # holds with probability 0.99; fixed data
        w = self.session(["quantiles:epsilon=0.01"], window=1000)
        w.ingest(list(range(5000)), batch_size=500)
        recent = w.quantiles([0, 1], last=200)
        self.assertIsNotNone(recent.coverage)
        self.assertEqual(recent.coverage.window_items, 200)
        self.assertGreaterEqual(recent[0].value, 4800 - recent.max_rank_error)
        self.assertEqual(recent[1].value, 4999)

    def test_correlated_sums_and_hierarchical_heavy_hitters(self):
        s = self.session(["corrsum:epsilon=0.01"])
        x = list(range(1, 2001))
        y = [2.0] * 2000
        with self.assertRaisesRegex(ValueError, "pass y="):
            s.ingest(x)
        s.ingest(x, y=y, batch_size=700)
        ans = s.correlated_sums(values=[1000], phis=[0.5])
        self.assertEqual(ans.y_sum, 4000.0)
        for c in ans:
            self.assertTrue(c.sum_lower <= 2000.0 <= c.sum_upper or c.by_phi, c)
            self.assertLessEqual(c.sum_upper - c.sum_lower, 2 * ans.max_sum_error + 1e-9)
        h = self.session(["hhh:epsilon=0.01"], kind="strings")
        h.ingest(["eu/fr/paris"] * 300 + ["eu/de/berlin"] * 300 + [f"us/{i}" for i in range(400)])
        prefixes = {p.prefix: p for p in h.hierarchical_heavy_hitters(0.2)}
        self.assertIn("eu/fr/paris", prefixes)
        self.assertIn("eu/de/berlin", prefixes)
        lo, hi = prefixes["eu/fr/paris"].total
        self.assertTrue(lo <= 300 <= hi)

    def test_moments_and_distinct_counts(self):
        rng = random.Random(5)
        values = [rng.gauss(1e6, 3.0) for _ in range(20000)]
        s = self.session(["quantiles", "hll:p=12"])
        s.ingest(values, weights=[1 + i % 2 for i in range(len(values))])
        m = s.moments()
        w = [1 + i % 2 for i in range(len(values))]
        total = sum(w)
        mean = math.fsum(x * k for x, k in zip(values, w)) / total
        var = math.fsum(k * (x - mean) ** 2 for x, k in zip(values, w)) / total
        self.assertEqual((m.n, m.count, m.complete), (total, total, True))
        self.assertEqual((m.min, m.max), (min(values), max(values)))
        self.assertAlmostEqual(m.mean, mean, delta=1e-9 * abs(mean))
        self.assertAlmostEqual(m.variance, var, delta=1e-9 * var)
        d = s.distinct()
        self.assertEqual(d.precision, 12)
        self.assertLessEqual(abs(d.estimate - len(set(values))), 3 * d.rse * len(set(values)))
        self.assertTrue(d.lower <= float(d) <= d.upper)
        keys = self.session(["misra_gries"], kind="uint64")
        keys.ingest([1, 2, 3])
        with self.assertRaises(streamstats.FailedPreconditionError):
            keys.moments()  # a key session has no numeric moments
        with self.assertRaises(streamstats.FailedPreconditionError):
            keys.distinct()  # no hll

    def test_parts_exported_and_merged_answer_as_one_session(self):
        rng = random.Random(17)
        values = [rng.lognormvariate(3, 1) for _ in range(30000)]
        keys = [rng.randrange(500) ** 2 % 997 for _ in range(30000)]
        whole = self.session(["count_min:epsilon=0.001"], kind="uint64")
        whole.ingest(keys)
        nums = self.session(["quantiles:epsilon=0.01"])
        cms = self.session(["count_min:epsilon=0.001"], kind="uint64")
        for part in range(3):
            n = self.session(["quantiles:epsilon=0.01"])
            n.ingest(values[part::3])
            k = self.session(["count_min:epsilon=0.001"], kind="uint64")
            k.ingest(keys[part * 10000:(part + 1) * 10000])
            e = n.export()
            self.assertEqual((e.count, e.format_version), (10000, 1))
            self.assertEqual(e.summaries, (("quantiles", "epsilon=0.01,window=1024", True),))
            self.assertEqual(nums.merge(e).merged_count, 10000)
            self.assertEqual(cms.merge(bytes(k.export())).count, (part + 1) * 10000)
        self.assert_quantiles_within_bound(nums, values, [0, 0.01, 0.5, 0.9, 0.99, 1])
        probe = list(range(0, 997, 7))
        self.assertEqual([f.estimate for f in cms.frequencies(probe)],
                         [f.estimate for f in whole.frequencies(probe)])
        data = whole.export().data
        with self.assertRaises(streamstats.InvalidArgumentError):
            cms.merge(data[:-3])
        with self.assertRaises(streamstats.FailedPreconditionError):
            nums.merge(data)  # uint64 Count-Min into numeric quantiles
        fcm = self.session(["fcm"], kind="uint64")
        self.assertFalse(fcm.export().summaries[0][2])
        with self.assertRaises(streamstats.FailedPreconditionError):
            fcm.merge(fcm.export())
        self.assertEqual(cms.count, 30000)

    def test_sessions_listing_info_and_delete(self):
        s = self.session(["quantiles", "lossy_counting"])
        s.ingest([1.0, 2.0, 3.0])
        info = s.info()
        self.assertEqual((info.name, info.value_kind, info.count), (s.name, "numeric", 3))
        self.assertEqual([k for k, _, _ in info.summaries], ["quantiles", "lossy_counting"])
        self.assertIn(s.name, [x.name for x in self.client.sessions()])
        s.delete()
        self.assertNotIn(s.name, [x.name for x in self.client.sessions()])
        with self.assertRaises(streamstats.NotFoundError):
            s.info()


if __name__ == "__main__":
    unittest.main(verbosity=2)
