#!/usr/bin/env python3
"""Structure checks for deploy/: rendered Kubernetes manifests, alert rules, Grafana dashboard.

Run by check_manifests.sh (ctest deploy_manifests); stdlib + PyYAML (Debian: python3-yaml).

  check_deploy.py manifests BASE.yaml GPU.yaml   rendered `kubectl kustomize` output of both
  check_deploy.py selftest BASE.yaml GPU.yaml    break the rendered objects on purpose, one way at
                                                 a time, and require the checks to notice each
  check_deploy.py cluster CLUSTER.yaml           rendered overlays/cluster (NATS JetStream and
                                                 streamstatsd replicas), then its own selftest
  check_deploy.py promql ALERTS.yml DASHBOARD.json OUT_RULES.yml
                                                 metric names and types used by the alert rules
                                                 and the dashboard; writes the dashboard's queries
                                                 as recording rules so promtool can parse them
Exit 0 when everything holds, 1 with one line per problem otherwise.
"""

import copy
import json
import re
import sys

import yaml

# The metrics streamstatsd exports (server side), by type. Dashboards and alerts may use nothing else.
COUNTERS = {
    "streamstats_ingest_items_total", "streamstats_ingest_bytes_total",
    "streamstats_ingest_batches_total", "streamstats_rejected_batches_total",
    "streamstats_rpc_requests_total", "streamstats_accelerator_fallbacks_total",
    "streamstats_accelerator_kernel_seconds_total", "streamstats_accelerator_bytes_copied_total",
    "streamstats_cluster_publish_failures_total", "streamstats_cluster_publish_duplicates_total",
    "streamstats_cluster_owner_changes_total", "streamstats_cluster_snapshots_total",
    "streamstats_cluster_fenced_appends_total", "streamstats_cluster_forwarded_total",
}
HISTOGRAMS = {
    "streamstats_rpc_duration_seconds", "streamstats_query_duration_seconds",
    "streamstats_wal_fsync_duration_seconds", "streamstats_snapshot_duration_seconds",
    "streamstats_cluster_publish_duration_seconds",
}
GAUGES = {
    "streamstats_sessions", "streamstats_session_memory_bytes", "streamstats_ingest_queue_depth",
    "streamstats_device_memory_bytes", "streamstats_build_info", "streamstats_session_quantile",
    "streamstats_cluster_log_position", "streamstats_cluster_replay_lag_records",
    "streamstats_cluster_owned_sessions",
}
ALL_METRICS = COUNTERS | HISTOGRAMS | GAUGES

# What the deployment promises; the manifests must agree with these and with each other.
GRPC_PORT = 50051
METRICS_PORT = 9464
DATA_DIR = "/var/lib/streamstats/data"
TOKENS_FILE = "/etc/streamstats/tokens"
UID = 10001
GPU = "nvidia.com/gpu"

API_VERSIONS = {
    "StatefulSet": "apps/v1", "Service": "v1", "Secret": "v1", "ServiceAccount": "v1",
    "PodDisruptionBudget": "policy/v1", "ServiceMonitor": "monitoring.coreos.com/v1",
}


class Checker:
    def __init__(self, name):
        self.name = name
        self.problems = []

    def expect(self, cond, msg):
        if not cond:
            self.problems.append(f"{self.name}: {msg}")
        return cond


def load_objects(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def quantity(q):
    """Kubernetes quantity -> float (cpu in cores, memory in bytes)."""
    s = str(q)
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", s)
    if not m:
        raise ValueError(f"bad quantity {s!r}")
    num, suf = float(m.group(1)), m.group(2)
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    if suf not in mult:
        raise ValueError(f"bad quantity suffix in {s!r}")
    return num * mult[suf]


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def flag_value(args, flag):
    vals = [a.split("=", 1)[1] for a in args if a.startswith(f"--{flag}=")]
    return vals[-1] if vals else None


def port_of(addr):
    return int(addr.rsplit(":", 1)[1]) if addr and ":" in addr else None


def check_manifests(objs, c, gpu):
    """Checks shared by the base and the GPU overlay; gpu says which one this is."""
    by_kind = {}
    for o in objs:
        for key in ("apiVersion", "kind", "metadata"):
            c.expect(key in o, f"an object lacks {key}: {str(o)[:80]}")
        kind = o.get("kind")
        name = o.get("metadata", {}).get("name")
        c.expect(bool(name), f"a {kind} has no metadata.name")
        if kind in API_VERSIONS:
            c.expect(o.get("apiVersion") == API_VERSIONS[kind],
                     f"{kind}/{name}: apiVersion {o.get('apiVersion')}, want {API_VERSIONS[kind]}")
        by_kind.setdefault(kind, []).append(o)
    for kind in API_VERSIONS:
        c.expect(kind in by_kind, f"no {kind} rendered")
    if not c.expect(len(by_kind.get("StatefulSet", [])) == 1, "want exactly one StatefulSet"):
        return

    sts = by_kind["StatefulSet"][0]
    spec = sts.get("spec", {})
    tmpl = spec.get("template", {})
    pod_labels = tmpl.get("metadata", {}).get("labels", {})
    pod = tmpl.get("spec", {})
    c.expect(spec.get("replicas", 1) == 1, f"replicas is {spec.get('replicas')}, the base ships 1")
    c.expect(matches(spec.get("selector", {}).get("matchLabels"), pod_labels),
             "StatefulSet selector does not match its pod template labels")

    # Services: one headless governing Service, one ClusterIP; both select the pods.
    services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
    headless = [s for s in services.values() if s.get("spec", {}).get("clusterIP") == "None"]
    cluster_ip = [s for s in services.values() if s.get("spec", {}).get("clusterIP") != "None"]
    c.expect(len(headless) == 1, f"want one headless Service, got {len(headless)}")
    c.expect(len(cluster_ip) == 1, f"want one ClusterIP Service, got {len(cluster_ip)}")
    gov = services.get(spec.get("serviceName"))
    c.expect(gov is not None and gov.get("spec", {}).get("clusterIP") == "None",
             f"serviceName {spec.get('serviceName')!r} is not a headless Service")
    for s in services.values():
        c.expect(matches(s.get("spec", {}).get("selector"), pod_labels),
                 f"Service {s['metadata']['name']} does not select the StatefulSet's pods")

    # The container: flags, ports, probes, resources, security.
    containers = pod.get("containers", [])
    main = [k for k in containers if k.get("name") == "streamstatsd"]
    if not c.expect(len(main) == 1, "no container named streamstatsd"):
        return
    ctr = main[0]
    args = [str(a) for a in ctr.get("command", [])[1:] + ctr.get("args", [])]
    c.expect(bool(ctr.get("image")), "streamstatsd has no image")
    listen = flag_value(args, "listen")
    metrics_listen = flag_value(args, "metrics_listen")
    c.expect(listen is not None and listen.startswith("0.0.0.0:"),
             f"--listen={listen}: a pod must listen on 0.0.0.0 to be reachable")
    c.expect(metrics_listen is not None and metrics_listen.startswith("0.0.0.0:"),
             f"--metrics_listen={metrics_listen}: Prometheus scrapes from outside the pod")
    c.expect(port_of(listen) == GRPC_PORT, f"--listen port is {port_of(listen)}, want {GRPC_PORT}")
    c.expect(port_of(metrics_listen) == METRICS_PORT,
             f"--metrics_listen port is {port_of(metrics_listen)}, want {METRICS_PORT}")
    c.expect(flag_value(args, "data_dir") == DATA_DIR, f"--data_dir is not {DATA_DIR}")
    c.expect(flag_value(args, "auth_tokens_file") == TOKENS_FILE,
             f"--auth_tokens_file is not {TOKENS_FILE} (a non-loopback listener needs tokens)")
    c.expect(not any(a.startswith("--allow_insecure_remote") for a in args),
             "--allow_insecure_remote in a deployment: use the tokens file")
    gpus = [a for a in args if a.startswith("--gpus=")]
    c.expect(len(gpus) == 1, f"want exactly one --gpus flag, got {gpus}")
    c.expect(gpus == (["--gpus=auto"] if gpu else ["--gpus=none"]),
             f"{gpus}: the {'GPU overlay' if gpu else 'base'} must pass "
             f"{'--gpus=auto' if gpu else '--gpus=none'}")

    cports = {p.get("name"): p.get("containerPort") for p in ctr.get("ports", [])}
    c.expect(cports.get("grpc") == GRPC_PORT, f"container port grpc is {cports.get('grpc')}")
    c.expect(cports.get("metrics") == METRICS_PORT, f"container port metrics is {cports.get('metrics')}")

    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = ctr.get(probe_name)
        if probe_name == "startupProbe" and probe is None:
            continue
        if not c.expect(probe is not None, f"no {probe_name}"):
            continue
        c.expect("grpc" in probe, f"{probe_name} is not a native grpc probe")
        others = {"httpGet", "tcpSocket", "exec"} & set(probe)
        c.expect(not others, f"{probe_name} also has {sorted(others)}")
        c.expect(probe.get("grpc", {}).get("port") == GRPC_PORT,
                 f"{probe_name} probes port {probe.get('grpc', {}).get('port')}, gRPC is on {GRPC_PORT}")

    for k in containers + pod.get("initContainers", []):
        res = k.get("resources", {})
        req, lim = res.get("requests", {}), res.get("limits", {})
        for r in ("cpu", "memory"):
            if c.expect(r in req and r in lim, f"container {k.get('name')}: {r} request and limit required"):
                try:
                    c.expect(quantity(req[r]) <= quantity(lim[r]),
                             f"container {k.get('name')}: {r} request {req[r]} > limit {lim[r]}")
                except ValueError as e:
                    c.expect(False, f"container {k.get('name')}: {e}")
        has_gpu = GPU in lim or GPU in req
        if gpu:
            c.expect(k is not ctr or str(lim.get(GPU)) == "1",
                     f"GPU overlay: streamstatsd limits {GPU}={lim.get(GPU)}, want 1")
            c.expect(GPU not in req or str(req[GPU]) == str(lim.get(GPU)),
                     f"{GPU} request and limit differ")
        else:
            c.expect(not has_gpu, f"container {k.get('name')} asks for {GPU} (only the overlay may)")

    psc = pod.get("securityContext", {})
    csc = ctr.get("securityContext", {})
    c.expect(psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, "runAsNonRoot is not set")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    c.expect(uid == UID, f"runAsUser is {uid}, want {UID} (the image's streamstats user)")
    c.expect(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true")
    c.expect(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation is not false")
    c.expect(csc.get("privileged") is not True, "privileged container")
    c.expect("ALL" in csc.get("capabilities", {}).get("drop", []), "capabilities are not dropped")

    # Volumes: the data PVC at --data_dir, the tokens Secret where --auth_tokens_file points.
    mounts = {m.get("mountPath"): m for m in ctr.get("volumeMounts", [])}
    volumes = {v.get("name"): v for v in pod.get("volumes", [])}
    claims = {t.get("metadata", {}).get("name"): t for t in spec.get("volumeClaimTemplates", [])}
    for m in ctr.get("volumeMounts", []):
        c.expect(m.get("name") in volumes or m.get("name") in claims,
                 f"volumeMount {m.get('name')} names no volume or claim template")
    data = mounts.get(DATA_DIR)
    if c.expect(data is not None, f"nothing is mounted at {DATA_DIR}"):
        claim = claims.get(data.get("name"))
        if c.expect(claim is not None, f"{DATA_DIR} is not backed by a volumeClaimTemplate"):
            cs = claim.get("spec", {})
            c.expect("ReadWriteOnce" in cs.get("accessModes", []), "data PVC is not ReadWriteOnce")
            c.expect("storage" in cs.get("resources", {}).get("requests", {}), "data PVC has no storage request")
        c.expect(not data.get("readOnly"), f"{DATA_DIR} is mounted read-only")
    tok_dir, tok_file = TOKENS_FILE.rsplit("/", 1)
    tok = mounts.get(tok_dir)
    if c.expect(tok is not None, f"nothing is mounted at {tok_dir}"):
        c.expect(tok.get("readOnly") is True, f"{tok_dir} is not mounted readOnly")
        c.expect("subPath" not in tok, f"{tok_dir} uses subPath (Secret updates would never arrive)")
        vol = volumes.get(tok.get("name"), {})
        sref = vol.get("secret", {})
        secret = next((s for s in by_kind.get("Secret", [])
                       if s["metadata"]["name"] == sref.get("secretName")), None)
        if c.expect(secret is not None, f"{tok_dir} is not a Secret rendered here ({sref.get('secretName')})"):
            items = sref.get("items")
            key = tok_file
            if items:
                paths = {i.get("path"): i.get("key") for i in items}
                c.expect(tok_file in paths, f"the Secret volume does not project {tok_file}")
                key = paths.get(tok_file, tok_file)
            content = secret.get("stringData", {}).get(key)
            if content is None and key in secret.get("data", {}):
                import base64
                content = base64.b64decode(secret["data"][key]).decode()
            if c.expect(content is not None, f"Secret {secret['metadata']['name']} has no key {key}"):
                lines = [ln for ln in content.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
                c.expect(bool(lines) and all(len(ln.split()) == 2 for ln in lines),
                         "tokens must be lines of `TENANT TOKEN`")
                c.expect(all("placeholder" in ln.lower() or "change-me" in ln.lower() for ln in lines),
                         "example tokens must be marked as placeholders")

    # Scraping: annotations on the pods, a ServiceMonitor selecting exactly one Service.
    ann = tmpl.get("metadata", {}).get("annotations", {})
    c.expect(ann.get("prometheus.io/scrape") == "true", "pod lacks prometheus.io/scrape: \"true\"")
    c.expect(ann.get("prometheus.io/port") == str(METRICS_PORT),
             f"prometheus.io/port is {ann.get('prometheus.io/port')}, metrics are on {METRICS_PORT}")
    c.expect(ann.get("prometheus.io/path", "/metrics") == "/metrics", "prometheus.io/path is not /metrics")

    def resolve(svc_port):
        t = svc_port.get("targetPort", svc_port.get("port"))
        return cports.get(t) if isinstance(t, str) else t

    for s in services.values():
        sp = {p.get("name"): p for p in s.get("spec", {}).get("ports", [])}
        n = s["metadata"]["name"]
        for pname, want in (("grpc", GRPC_PORT), ("metrics", METRICS_PORT)):
            p = sp.get(pname)
            if c.expect(p is not None, f"Service {n} has no port named {pname}"):
                c.expect(p.get("port") == want, f"Service {n} port {pname} is {p.get('port')}, want {want}")
                c.expect(resolve(p) == want,
                         f"Service {n} port {pname} targets {p.get('targetPort')}, not container port {want}")

    for sm in by_kind.get("ServiceMonitor", []):
        smn = sm["metadata"]["name"]
        sel = sm.get("spec", {}).get("selector", {}).get("matchLabels", {})
        picked = [s for s in services.values() if matches(sel, s["metadata"].get("labels", {}))]
        if c.expect(len(picked) == 1,
                    f"ServiceMonitor {smn} selects {len(picked)} Services "
                    f"({[s['metadata']['name'] for s in picked]}); want exactly one (else pods are scraped twice)"):
            sp = {p.get("name"): p for p in picked[0]["spec"].get("ports", [])}
            eps = sm.get("spec", {}).get("endpoints", [])
            c.expect(bool(eps), f"ServiceMonitor {smn} has no endpoints")
            for ep in eps:
                p = sp.get(ep.get("port"))
                c.expect(p is not None and resolve(p) == METRICS_PORT,
                         f"ServiceMonitor {smn} scrapes port {ep.get('port')!r}, not the Service's metrics port")
                c.expect(ep.get("path", "/metrics") == "/metrics", f"ServiceMonitor {smn} path is not /metrics")

    for pdb in by_kind.get("PodDisruptionBudget", []):
        ps = pdb.get("spec", {})
        c.expect(matches(ps.get("selector", {}).get("matchLabels"), pod_labels),
                 "PodDisruptionBudget does not select the pods")
        c.expect(("minAvailable" in ps) != ("maxUnavailable" in ps),
                 "PodDisruptionBudget needs exactly one of minAvailable / maxUnavailable")
        c.expect(ps.get("minAvailable") not in (1, "100%") or spec.get("replicas", 1) > 1,
                 "minAvailable: 1 with one replica blocks every node drain")

    tolerates_gpu = any(t.get("key") == GPU for t in pod.get("tolerations", []))
    if gpu:
        c.expect(tolerates_gpu, f"GPU overlay: no toleration for {GPU}")
        c.expect(bool(pod.get("nodeSelector")) or bool(pod.get("affinity", {}).get("nodeAffinity")),
                 "GPU overlay: no nodeSelector / node affinity for GPU nodes")
    else:
        c.expect(not tolerates_gpu, f"base tolerates {GPU} taints (only the overlay may)")


def check_pair(base, gpu):
    cb, cg = Checker("base"), Checker("overlays/gpu")
    check_manifests(base, cb, gpu=False)
    check_manifests(gpu, cg, gpu=True)
    # The overlay changes the StatefulSet and nothing else.
    strip = lambda objs: sorted((json.dumps(o, sort_keys=True) for o in objs if o.get("kind") != "StatefulSet"))
    cg.expect(strip(base) == strip(gpu), "the overlay changes objects other than the StatefulSet")
    return cb.problems + cg.problems


def sts_ctr(objs):
    sts = next(o for o in objs if o.get("kind") == "StatefulSet")
    return sts, sts["spec"]["template"]["spec"], sts["spec"]["template"]["spec"]["containers"][0]


def mutations():
    """(description, which rendering to break, function): each must make check_pair complain."""
    def m(desc, target, fn):
        return (desc, target, fn)

    def obj(kind, objs):
        return next(o for o in objs if o.get("kind") == kind)

    yield m("liveness probe switched to tcpSocket", "base",
            lambda o: sts_ctr(o)[2]["livenessProbe"].update({"tcpSocket": {"port": 50051}}) or
            sts_ctr(o)[2]["livenessProbe"].pop("grpc"))
    yield m("readiness probe on the metrics port", "gpu",
            lambda o: sts_ctr(o)[2]["readinessProbe"]["grpc"].update({"port": 9464}))
    yield m("readiness probe removed", "base", lambda o: sts_ctr(o)[2].pop("readinessProbe"))
    yield m("GPU limit in the base", "base",
            lambda o: sts_ctr(o)[2]["resources"]["limits"].update({GPU: 1}))
    yield m("GPU limit dropped from the overlay", "gpu",
            lambda o: sts_ctr(o)[2]["resources"]["limits"].pop(GPU))
    yield m("GPU toleration dropped from the overlay", "gpu", lambda o: sts_ctr(o)[1].pop("tolerations"))
    yield m("--gpus=none left in the overlay", "gpu",
            lambda o: sts_ctr(o)[2].update({"args": [a.replace("--gpus=auto", "--gpus=none")
                                                     for a in sts_ctr(o)[2]["args"]]}))
    yield m("memory limit removed", "base", lambda o: sts_ctr(o)[2]["resources"]["limits"].pop("memory"))
    yield m("cpu request above limit", "base",
            lambda o: sts_ctr(o)[2]["resources"]["requests"].update({"cpu": "64"}))
    yield m("runs as root", "base", lambda o: sts_ctr(o)[2]["securityContext"].update({"runAsUser": 0}))
    yield m("writable root filesystem", "gpu",
            lambda o: sts_ctr(o)[2]["securityContext"].update({"readOnlyRootFilesystem": False}))
    yield m("no PVC template", "base", lambda o: sts_ctr(o)[0]["spec"].pop("volumeClaimTemplates"))
    yield m("data dir flag elsewhere", "base",
            lambda o: sts_ctr(o)[2].update({"args": [a.replace(DATA_DIR, "/tmp/data") for a in sts_ctr(o)[2]["args"]]}))
    yield m("listen on loopback", "base",
            lambda o: sts_ctr(o)[2].update({"args": [a.replace("--listen=0.0.0.0", "--listen=127.0.0.1")
                                                     for a in sts_ctr(o)[2]["args"]]}))
    yield m("container port renumbered", "base",
            lambda o: sts_ctr(o)[2]["ports"][0].update({"containerPort": 50052}))
    yield m("ServiceMonitor selects both Services", "base",
            lambda o: obj("ServiceMonitor", o)["spec"]["selector"]["matchLabels"].pop("streamstats.io/service"))
    yield m("ServiceMonitor selects nothing", "base",
            lambda o: obj("ServiceMonitor", o)["spec"]["selector"]["matchLabels"].update({"app.kubernetes.io/name": "nope"}))
    yield m("ServiceMonitor scrapes the grpc port", "base",
            lambda o: obj("ServiceMonitor", o)["spec"]["endpoints"][0].update({"port": "grpc"}))
    yield m("Service selector misses the pods", "base",
            lambda o: obj("Service", o)["spec"]["selector"].update({"app.kubernetes.io/component": "db"}))
    yield m("Service targets the wrong container port", "base",
            lambda o: obj("Service", o)["spec"]["ports"][1].update({"targetPort": 9999}))
    yield m("PodDisruptionBudget removed", "base", lambda o: o.remove(obj("PodDisruptionBudget", o)))
    yield m("ServiceMonitor removed", "gpu", lambda o: o.remove(obj("ServiceMonitor", o)))
    yield m("scrape annotation port wrong", "base",
            lambda o: sts_ctr(o)[0]["spec"]["template"]["metadata"]["annotations"].update({"prometheus.io/port": "9090"}))
    yield m("tokens Secret renamed", "base",
            lambda o: obj("Secret", o)["metadata"].update({"name": "other"}))
    yield m("real-looking token", "base",
            lambda o: obj("Secret", o)["stringData"].update({"tokens": "payments s3cr3t\n"}))
    yield m("overlay changes the Service", "gpu",
            lambda o: obj("Service", o)["metadata"]["labels"].update({"x": "y"}))


def selftest(base, gpu):
    if check_pair(base, gpu):
        return ["selftest: the unmodified renderings already fail"]
    missed = []
    n = 0
    for desc, target, fn in mutations():
        n += 1
        b, g = copy.deepcopy(base), copy.deepcopy(gpu)
        fn(b if target == "base" else g)
        found = check_pair(b, g)
        if not found:
            missed.append(f"selftest: breaking the {target} ({desc}) went unnoticed")
        else:
            print(f"  caught: {desc}: {found[0]}")
    print(f"selftest: {n - len(missed)}/{n} deliberate breakages caught")
    return missed


# ---------------------------------------------------------------------------------------------
# overlays/cluster: streamstatsd replicas on a NATS JetStream cluster (README "Running a cluster").

def named(kind, name, objs):
    return next((o for o in objs if o.get("kind") == kind and o["metadata"]["name"] == name), None)


def required_anti_affinity(sts):
    """The pod template's required anti-affinity terms spread its own pods one per node."""
    labels = sts["spec"]["template"]["metadata"]["labels"]
    terms = (sts["spec"]["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", []))
    return any(t.get("topologyKey") == "kubernetes.io/hostname" and
               matches(t.get("labelSelector", {}).get("matchLabels"), labels) for t in terms)


def check_cluster(objs, c):
    nats = named("StatefulSet", "nats", objs)
    ours = named("StatefulSet", "streamstats", objs)
    if not c.expect(nats is not None and ours is not None, "StatefulSets nats and streamstats"):
        return
    n = nats["spec"].get("replicas", 1)
    c.expect(n >= 3 and n % 2 == 1, f"NATS replicas must be an odd number >= 3 (a quorum survives one loss), got {n}")
    pod = nats["spec"]["template"]
    ctr = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    c.expect({"client", "cluster", "monitor"} <= set(ports), f"NATS container ports client/cluster/monitor, got {sorted(ports)}")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        pr = ctr.get(probe, {}).get("httpGet", {})
        c.expect(pr.get("port") in ports and str(pr.get("path", "")).startswith("/healthz"),
                 f"NATS {probe}: an HTTP /healthz probe on a declared port")
    c.expect(required_anti_affinity(nats), "NATS servers: required anti-affinity, one per node")
    c.expect(required_anti_affinity(ours), "streamstatsd replicas: required anti-affinity, one per node")
    # The config: JetStream on a volume claimed per pod, routes to every server by stable DNS.
    cm_name = next((v["configMap"]["name"] for v in pod["spec"].get("volumes", []) if "configMap" in v), None)
    cm = named("ConfigMap", cm_name, objs) if cm_name else None
    conf = next(iter(cm["data"].values()), "") if c.expect(cm is not None, "NATS config ConfigMap mounted") else ""
    store = re.search(r"store_dir:\s*(\S+)", conf)
    claims = {t["metadata"]["name"] for t in nats["spec"].get("volumeClaimTemplates", [])}
    mounts = {m["name"]: m["mountPath"] for m in ctr.get("volumeMounts", [])}
    c.expect(re.search(r"jetstream\s*\{", conf) is not None, "NATS config enables JetStream")
    c.expect(store is not None and any(mounts.get(cl) and store.group(1).startswith(mounts[cl]) for cl in claims),
             "JetStream's store_dir is on a volume claimed per pod")
    headless = nats["spec"].get("serviceName")
    svc = named("Service", headless, objs)
    if c.expect(svc is not None and svc["spec"].get("clusterIP") == "None", "NATS headless governing Service"):
        c.expect(matches(svc["spec"].get("selector"), pod["metadata"]["labels"]), "NATS headless Service selects the servers")
        c.expect(svc["spec"].get("publishNotReadyAddresses") is True, "NATS routes need DNS before readiness")
    routes = set(re.findall(r"nats://([a-z0-9.-]+):(\d+)", conf.split("cluster", 1)[-1]))
    want = {(f"nats-{i}.{headless}", str(ports.get("cluster"))) for i in range(n)}
    c.expect(want <= routes, f"NATS cluster routes to every server ({sorted(want - routes)} missing)")
    pdb = next((o for o in objs if o.get("kind") == "PodDisruptionBudget" and
                matches(o["spec"].get("selector", {}).get("matchLabels"), pod["metadata"]["labels"])), None)
    if c.expect(pdb is not None, "a PodDisruptionBudget for the NATS servers"):
        c.expect(pdb["spec"].get("minAvailable") == n // 2 + 1, f"NATS PDB keeps the quorum: minAvailable {n // 2 + 1}")
    # streamstatsd: every server in --cluster, the log's replicas within the cluster, identity.
    octr = ours["spec"]["template"]["spec"]["containers"][0]
    args = octr.get("args", [])
    urls = set((flag_value(args, "cluster") or "").split(","))
    c.expect({f"nats://nats-{i}.{headless}:{ports.get('client')}" for i in range(n)} <= urls,
             "--cluster names every NATS server's client port")
    r = flag_value(args, "cluster_replicas")
    c.expect(r is not None and r.isdigit() and 3 <= int(r) <= n, f"--cluster_replicas in [3, {n}], got {r}")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in octr.get("env", [])}
    c.expect(env.get("POD_NAME") == "metadata.name", "POD_NAME from the pod's name")
    c.expect(flag_value(args, "node_id") == "$(POD_NAME)", "--node_id is the pod name")
    c.expect(flag_value(args, "advertise") == f"$(POD_NAME).{ours['spec']['serviceName']}:{GRPC_PORT}",
             "--advertise is the pod's stable DNS name and gRPC port")
    c.expect(ours["spec"].get("replicas", 1) >= 3, "at least 3 streamstatsd replicas")


def cluster_mutations():
    def sts(name):
        return lambda o: named("StatefulSet", name, o)

    def ctr(name):
        return lambda o: sts(name)(o)["spec"]["template"]["spec"]["containers"][0]

    def conf(o):
        return named("ConfigMap", "nats-config", o)["data"]

    def set_args(o, fn):
        c = ctr("streamstats")(o)
        c["args"] = [fn(a) for a in c["args"]]

    yield "two NATS servers", lambda o: sts("nats")(o)["spec"].update({"replicas": 2})
    yield "NATS anti-affinity dropped", lambda o: sts("nats")(o)["spec"]["template"]["spec"].pop("affinity")
    yield "streamstatsd anti-affinity only preferred", lambda o: sts("streamstats")(o)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"].update(
        {"preferredDuringSchedulingIgnoredDuringExecution": [], "requiredDuringSchedulingIgnoredDuringExecution": []})
    yield "NATS PDB below quorum", lambda o: named("PodDisruptionBudget", "nats", o)["spec"].update({"minAvailable": 1})
    yield "NATS liveness probe removed", lambda o: ctr("nats")(o).pop("livenessProbe")
    yield "JetStream off", lambda o: conf(o).update({"nats.conf": conf(o)["nats.conf"].replace("jetstream {", "# {")})
    yield "JetStream store on the root filesystem", lambda o: conf(o).update(
        {"nats.conf": conf(o)["nats.conf"].replace("store_dir: /data/jetstream", "store_dir: /tmp/js")})
    yield "a route missing", lambda o: conf(o).update(
        {"nats.conf": conf(o)["nats.conf"].replace("nats://nats-2.nats-headless:6222", "")})
    yield "--cluster misses a server", lambda o: set_args(o, lambda a: a.replace(",nats://nats-2.nats-headless:4222", ""))
    yield "--cluster_replicas=1", lambda o: set_args(o, lambda a: "--cluster_replicas=1" if a.startswith("--cluster_replicas=") else a)
    yield "--node_id fixed", lambda o: set_args(o, lambda a: "--node_id=node" if a.startswith("--node_id=") else a)
    yield "POD_NAME env dropped", lambda o: ctr("streamstats")(o).pop("env")
    yield "one streamstatsd replica", lambda o: sts("streamstats")(o)["spec"].update({"replicas": 1})


def check_cluster_rendering(objs):
    c = Checker("overlays/cluster")
    check_cluster(objs, c)
    return c.problems


def cluster_selftest(objs):
    if check_cluster_rendering(objs):
        return ["cluster selftest: the unmodified rendering already fails"]
    missed, n = [], 0
    for desc, fn in cluster_mutations():
        n += 1
        o = copy.deepcopy(objs)
        fn(o)
        found = check_cluster_rendering(o)
        if not found:
            missed.append(f"cluster selftest: breaking overlays/cluster ({desc}) went unnoticed")
        else:
            print(f"  caught: {desc}: {found[0]}")
    print(f"cluster selftest: {n - len(missed)}/{n} deliberate breakages caught")
    return missed


# ---------------------------------------------------------------------------------------------
# PromQL in alerts and dashboard.

STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
NAME_RE = re.compile(r"\b(streamstats_[a-zA-Z0-9_]*)")


def check_expr(expr, where, problems, names_only=False):
    """Every streamstats_* name is an exported metric, used the way its type allows."""
    bare = STRING_RE.sub('""', expr)
    names = list(NAME_RE.finditer(bare))
    if not names and not re.search(r"\bup\b", bare):
        problems.append(f"{where}: uses no streamstats metric: {expr.strip()[:100]}")
    for m in names:
        name = m.group(1)
        rest = bare[m.end():]
        rest = re.sub(r"^\s*\{[^}]*\}", "", rest)  # label matchers
        is_range = bool(re.match(r"\s*\[", rest))
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if names_only:
            if name not in ALL_METRICS and base not in HISTOGRAMS:
                problems.append(f"{where}: {name} is not a metric streamstatsd exports")
        elif name in COUNTERS:
            if not is_range:
                problems.append(f"{where}: counter {name} used without a range (wrap it in rate/increase)")
        elif base in HISTOGRAMS and base != name:
            if not is_range:
                problems.append(f"{where}: histogram series {name} used without a range")
            if name.endswith("_bucket") and "histogram_quantile" not in bare:
                problems.append(f"{where}: {name} without histogram_quantile")
        elif name in HISTOGRAMS:
            problems.append(f"{where}: histogram {name} used bare; use _bucket, _sum or _count")
        elif name in GAUGES:
            if is_range and not re.search(r"_over_time\s*\(", bare):
                problems.append(f"{where}: gauge {name} used in a range outside *_over_time")
        else:
            problems.append(f"{where}: {name} is not a metric streamstatsd exports")


GRAFANA_VARS = re.compile(r"\$\{?(\w+)(?::\w+)?\}?")


def grafana_to_promql(expr):
    def sub(m):
        v = m.group(1)
        if v in ("__rate_interval", "__interval", "__range"):
            return "5m"
        return ".*" if v != "job" else "streamstats"
    return GRAFANA_VARS.sub(sub, expr)


def check_promql(alerts_path, dashboard_path, out_rules):
    problems = []
    with open(alerts_path) as f:
        alerts = yaml.safe_load(f)
    names = set()
    for g in alerts.get("groups", []):
        for r in g.get("rules", []):
            where = f"alerts.yml {r.get('alert') or r.get('record')}"
            check_expr(r.get("expr", ""), where, problems)
            if "alert" in r:
                names.add(r["alert"])
                if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                    problems.append(f"{where}: severity label missing or unusual")
                if not r.get("annotations", {}).get("summary"):
                    problems.append(f"{where}: no summary annotation")
                if 'job="streamstats"' not in r.get("expr", ""):
                    problems.append(f'{where}: does not select job="streamstats"')
    for want in ("StreamstatsHighErrorRate", "StreamstatsWalFsyncSlow", "StreamstatsAcceleratorFallbacks",
                 "StreamstatsTargetDown", "StreamstatsTargetMissing", "StreamstatsIngestStalled"):
        if want not in names:
            problems.append(f"alerts.yml: no alert {want}")

    with open(dashboard_path) as f:
        dash = json.load(f)  # a parse error raises: the test fails with Python's message
    for key in ("title", "uid", "panels", "schemaVersion"):
        if key not in dash:
            problems.append(f"dashboard: no {key}")
    rules = []
    ids = set()
    used = set()
    def walk(panels):
        for p in panels:
            pid = p.get("id")
            if pid in ids:
                problems.append(f"dashboard: duplicate panel id {pid}")
            ids.add(pid)
            if "gridPos" not in p:
                problems.append(f"dashboard: panel {p.get('title')!r} has no gridPos")
            if p.get("type") == "row":
                walk(p.get("panels", []))
                continue
            targets = p.get("targets", [])
            if not targets:
                problems.append(f"dashboard: panel {p.get('title')!r} has no queries")
            for t in targets:
                expr = t.get("expr", "")
                where = f"dashboard panel {p.get('title')!r} {t.get('refId')}"
                check_expr(expr, where, problems)
                used.update(NAME_RE.findall(STRING_RE.sub('""', expr)))
                rules.append({"record": f"dashboard:panel{pid}:{t.get('refId', 'A')}".lower(),
                              "expr": grafana_to_promql(expr)})
    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", q or "")
            if not m:
                problems.append(f"dashboard: variable {v.get('name')} query is not label_values(...): {q}")
                continue
            check_expr(m.group(1), f"dashboard variable {v.get('name')}", problems, names_only=True)
            rules.append({"record": f"dashboard:var:{v.get('name')}", "expr": grafana_to_promql(m.group(1))})
    used = {re.sub(r"_(bucket|sum|count)$", "", n) if re.sub(r"_(bucket|sum|count)$", "", n) in HISTOGRAMS else n
            for n in used}
    for want in ("streamstats_ingest_items_total", "streamstats_rpc_duration_seconds",
                 "streamstats_ingest_queue_depth", "streamstats_accelerator_kernel_seconds_total",
                 "streamstats_accelerator_fallbacks_total", "streamstats_device_memory_bytes",
                 "streamstats_session_quantile", "streamstats_sessions", "streamstats_session_memory_bytes"):
        if want not in used:
            problems.append(f"dashboard: no panel shows {want}")
    with open(out_rules, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, sort_keys=False)
    print(f"promql: {len(rules)} dashboard queries and {sum(len(g.get('rules', [])) for g in alerts['groups'])} "
          f"alert rules checked against {len(ALL_METRICS)} exported metrics")
    return problems


def main(argv):
    if len(argv) == 4 and argv[1] in ("manifests", "selftest"):
        base, gpu = load_objects(argv[2]), load_objects(argv[3])
        problems = check_pair(base, gpu) if argv[1] == "manifests" else selftest(base, gpu)
        if argv[1] == "manifests" and not problems:
            print(f"manifests: base ({len(base)} objects) and overlays/gpu ({len(gpu)} objects) pass")
    elif len(argv) == 3 and argv[1] == "cluster":
        objs = load_objects(argv[2])
        problems = check_cluster_rendering(objs)
        if not problems:
            print(f"manifests: overlays/cluster ({len(objs)} objects) passes")
            problems = cluster_selftest(objs)
    elif len(argv) == 5 and argv[1] == "promql":
        problems = check_promql(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
