//! deploy/ can't rot: every manifest parses, the Kubernetes objects agree
//! with the config they mount (ports, probes, paths, drain budget, cluster
//! map), the container image agrees with its built-in config, the systemd
//! unit is hardened, and every metric the alert rules and the dashboard use
//! is one a real node exports (scraped from an in-process node).

mod common;

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{self as promql, Expr, LabelModifier};
use rush_daemon::Config;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

// ------------------------------------------------------------- files ----

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(rel: &str) -> String {
    let path = deploy().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_docs(rel: &str) -> Vec<Yaml> {
    let docs = YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert!(!docs.is_empty(), "{rel}: no YAML document");
    docs
}

fn yaml(rel: &str) -> Yaml {
    let mut docs = yaml_docs(rel);
    assert_eq!(docs.len(), 1, "{rel}: one document expected");
    docs.remove(0)
}

fn s<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what}: expected a string, got {y:?}"))
}

fn int(y: &Yaml, what: &str) -> i64 {
    y.as_i64()
        .unwrap_or_else(|| panic!("{what}: expected an integer, got {y:?}"))
}

fn list<'a>(y: &'a Yaml, what: &str) -> &'a Vec<Yaml> {
    y.as_vec()
        .unwrap_or_else(|| panic!("{what}: expected a list, got {y:?}"))
}

/// The element of a list whose `name` is `name`.
fn named<'a>(items: &'a Yaml, name: &str, what: &str) -> &'a Yaml {
    list(items, what)
        .iter()
        .find(|i| i["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("{what}: nothing named {name:?}"))
}

fn port_of(addr: &str) -> u16 {
    addr.parse::<SocketAddr>()
        .unwrap_or_else(|e| panic!("{addr:?}: {e}"))
        .port()
}

// ------------------------------------------------- the k8s objects ----

const STS: &str = "k8s/statefulset.yaml";
/// The replicas' StatefulSet: the primaries' but for names and placement.
const REPLICA_STS: &str = "k8s/statefulset-replica.yaml";
const CONFIGMAP: &str = "k8s/configmap.yaml";

/// Worst-case shutdown after SIGTERM, in units of `server.drain_timeout_secs`
/// (`Running::shutdown`: the redirect listener gets up to one drain timeout,
/// then connections get up to two — one to finish, one to flush answers).
const DRAIN_TIMEOUTS_PER_STOP: u64 = 3;

fn configmap_file(key: &str) -> String {
    let cm = yaml(CONFIGMAP);
    assert_eq!(s(&cm["kind"], "kind"), "ConfigMap");
    s(&cm["data"][key], key).to_string()
}

/// The ConfigMap's rushd.toml, through the daemon's own parser and checks.
fn configmap_config() -> Config {
    let text = configmap_file("rushd.toml");
    let c = Config::from_toml(&text, Path::new("deploy/k8s/configmap.yaml: rushd.toml"))
        .expect("the ConfigMap's rushd.toml parses");
    c.validate().expect("and is valid");
    c
}

fn container(sts: &Yaml) -> &Yaml {
    let containers = list(&sts["spec"]["template"]["spec"]["containers"], "containers");
    assert_eq!(containers.len(), 1, "one container");
    &containers[0]
}

/// The container port a probe's `port` (number or name) refers to.
fn probe_port(c: &Yaml, probe: &Yaml) -> i64 {
    let port = &probe["httpGet"]["port"];
    if let Some(n) = port.as_i64() {
        return n;
    }
    let name = s(port, "probe port");
    int(
        &named(&c["ports"], name, "container ports")["containerPort"],
        "containerPort",
    )
}

fn kustomization_namespace() -> String {
    s(
        &yaml("k8s/kustomization.yaml")["namespace"],
        "kustomization namespace",
    )
    .to_string()
}

#[test]
fn every_yaml_json_and_toml_file_parses() {
    let mut seen = 0;
    let mut stack = vec![deploy()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read deploy/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("text file");
            let name = path.display().to_string();
            match path.extension().and_then(|e| e.to_str()) {
                Some("yaml" | "yml") => {
                    let docs =
                        YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(
                        docs.iter().all(|d| d.as_hash().is_some()),
                        "{name}: every document is a mapping"
                    );
                }
                Some("json") => {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
                Some("toml") => {
                    // Every .toml in deploy/ is a rushd config.
                    let c = Config::from_toml(&text, &path).unwrap_or_else(|e| panic!("{e}"));
                    c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
                }
                _ => continue,
            }
            seen += 1;
        }
    }
    // rushd.toml, container.toml, 8 in k8s/, 2 in prometheus/, 1 dashboard.
    assert!(seen >= 13, "found only {seen} files to check");
}

#[test]
fn configmap_config_fits_the_statefulset() {
    let c = configmap_config();
    let sts = yaml(STS);
    let pod = &sts["spec"]["template"]["spec"];
    let ctr = container(&sts);

    // Reachable over the pod network.
    let listen: SocketAddr = c.server.listen.parse().unwrap();
    let http: SocketAddr = c.server.http.parse().unwrap();
    assert!(listen.ip().is_unspecified(), "listen on 0.0.0.0 in a pod");
    assert!(http.ip().is_unspecified(), "HTTP on 0.0.0.0 in a pod");
    assert!(
        c.node.id.is_none(),
        "one ConfigMap for all pods: no node id"
    );
    assert!(!c.debug.clock_control, "never in production");

    // The memory budget sizes every cache and buffer, and leaves the
    // container a fifth of its limit besides the budget's own headroom.
    let limit = s(&ctr["resources"]["limits"]["memory"], "memory limit");
    let limit_mb = limit
        .strip_suffix("Gi")
        .map(|g| g.parse::<usize>().unwrap() * 1024)
        .or_else(|| limit.strip_suffix("Mi").map(|m| m.parse().unwrap()))
        .unwrap_or_else(|| panic!("memory limit {limit:?} in Gi or Mi"));
    assert!(c.memory.budget_mb > 0, "a pod's node runs on a budget");
    assert!(
        c.memory.budget_mb <= limit_mb * 80 / 100,
        "memory.budget_mb {} over 80 % of the container's {limit}",
        c.memory.budget_mb
    );
    assert!(c.named_sizes.is_empty(), "the budget sizes the caches");
    let requests = s(&ctr["resources"]["requests"]["memory"], "memory request");
    assert_eq!(
        requests, limit,
        "memory requested = its limit (no overcommit)"
    );

    // Every listener has its container port and every port a listener.
    let mut listeners = BTreeSet::from([listen.port() as i64, http.port() as i64]);
    if !c.links.redirect_listen.is_empty() {
        listeners.insert(port_of(&c.links.redirect_listen) as i64);
    }
    if !c.replication.listen.is_empty() {
        listeners.insert(port_of(&c.replication.listen) as i64);
    }
    let ports: BTreeSet<i64> = list(&ctr["ports"], "ports")
        .iter()
        .map(|p| int(&p["containerPort"], "containerPort"))
        .collect();
    assert_eq!(ports, listeners, "container ports = the config's listeners");

    // Probes: readiness on /ready, liveness and startup on /health, all on
    // the HTTP listener.
    for (probe, path) in [
        ("readinessProbe", "/ready"),
        ("livenessProbe", "/health"),
        ("startupProbe", "/health"),
    ] {
        let p = &ctr[probe];
        assert_eq!(s(&p["httpGet"]["path"], probe), path, "{probe}");
        assert_eq!(
            probe_port(ctr, p),
            http.port() as i64,
            "{probe} on the HTTP port"
        );
    }

    // Drain budget: preStop pause, then rushd's worst-case drain.
    let pre_stop = list(&ctr["lifecycle"]["preStop"]["exec"]["command"], "preStop");
    assert_eq!(s(&pre_stop[0], "preStop"), "sleep");
    let pause: u64 = s(&pre_stop[1], "preStop seconds").parse().unwrap();
    assert!(pause > 0);
    let grace = int(
        &pod["terminationGracePeriodSeconds"],
        "terminationGracePeriodSeconds",
    ) as u64;
    let drain = c.server.drain_timeout_secs;
    assert!(
        grace > pause + DRAIN_TIMEOUTS_PER_STOP * drain,
        "terminationGracePeriodSeconds {grace} must exceed preStop {pause} + \
         {DRAIN_TIMEOUTS_PER_STOP} x drain_timeout_secs {drain}"
    );

    // The data directory is the persistent volume.
    let data = c.storage.data_dir.to_str().unwrap();
    let mounts = &ctr["volumeMounts"];
    let data_mount = list(mounts, "volumeMounts")
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(data))
        .unwrap_or_else(|| panic!("nothing mounted at data_dir {data}"));
    let claim = s(&data_mount["name"], "data mount");
    let templates = &sts["spec"]["volumeClaimTemplates"];
    let pvc = list(templates, "volumeClaimTemplates")
        .iter()
        .find(|t| t["metadata"]["name"].as_str() == Some(claim))
        .unwrap_or_else(|| panic!("data_dir is not on a volume claim template"));
    assert!(!pvc["spec"]["resources"]["requests"]["storage"].is_badvalue());

    // The config and the token files it names are mounted from the
    // ConfigMap and the Secret.
    let args: Vec<&str> = list(&ctr["args"], "args")
        .iter()
        .map(|a| s(a, "arg"))
        .collect();
    let config_path = args
        .iter()
        .find_map(|a| a.strip_prefix("--config="))
        .expect("--config=FILE");
    let map_path = args
        .iter()
        .find_map(|a| a.strip_prefix("--cluster-map="))
        .expect("--cluster-map=FILE");
    let volume_of = |file: &str| -> &Yaml {
        let m = list(mounts, "volumeMounts")
            .iter()
            .find(|m| {
                let dir = s(&m["mountPath"], "mountPath");
                Path::new(file).parent() == Some(Path::new(dir))
            })
            .unwrap_or_else(|| panic!("no volume mounted where {file} is"));
        named(&pod["volumes"], s(&m["name"], "mount name"), "volumes")
    };
    let cm_name = s(&yaml(CONFIGMAP)["metadata"]["name"], "ConfigMap name").to_string();
    for (file, key) in [(config_path, "rushd.toml"), (map_path, "cluster.toml")] {
        assert_eq!(
            volume_of(file)["configMap"]["name"].as_str(),
            Some(cm_name.as_str()),
            "{file} comes from the ConfigMap"
        );
        assert!(file.ends_with(key), "{file} is the ConfigMap's {key}");
    }
    let secret = yaml("k8s/secret.example.yaml");
    let secret_name = s(&secret["metadata"]["name"], "Secret name");
    for file in [&c.auth.token_file, &c.auth.admin_token_file] {
        let file = file
            .as_ref()
            .expect("auth on in the cluster")
            .to_str()
            .unwrap();
        let v = volume_of(file);
        assert_eq!(v["secret"]["secretName"].as_str(), Some(secret_name));
        let key = Path::new(file).file_name().unwrap().to_str().unwrap();
        assert!(
            !secret["stringData"][key].is_badvalue(),
            "the Secret example has {key}"
        );
    }
}

#[test]
fn statefulset_shape() {
    let sts = yaml(STS);
    assert_eq!(s(&sts["kind"], "kind"), "StatefulSet");
    let spec = &sts["spec"];
    assert_eq!(int(&spec["replicas"], "replicas"), 3);
    assert_eq!(
        s(&spec["updateStrategy"]["type"], "updateStrategy"),
        "RollingUpdate"
    );
    assert!(matches!(
        s(&spec["podManagementPolicy"], "podManagementPolicy"),
        "Parallel" | "OrderedReady"
    ));
    let pod_labels = spec["template"]["metadata"]["labels"].as_hash().unwrap();
    for (k, v) in spec["selector"]["matchLabels"].as_hash().unwrap() {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "selector matches the pod labels"
        );
    }
    let ctr = container(&sts);
    let env = &ctr["env"];
    for (var, field) in [
        ("RUSH_NODE_ID", "metadata.name"),
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert_eq!(
            s(
                &named(env, var, "env")["valueFrom"]["fieldRef"]["fieldPath"],
                var
            ),
            field,
            "{var} from the downward API"
        );
    }
    // The advertised address is the pod's name under the headless Service.
    let c = configmap_config();
    let service = s(&spec["serviceName"], "serviceName");
    let advertise = list(&ctr["args"], "args")
        .iter()
        .find_map(|a| s(a, "arg").strip_prefix("--advertise="))
        .expect("--advertise=");
    assert_eq!(
        advertise,
        format!(
            "$(POD_NAME).{service}.$(POD_NAMESPACE).svc:{}",
            port_of(&c.server.listen)
        )
    );
    // Runs as the image's user, without privileges.
    let pod_sec = &spec["template"]["spec"]["securityContext"];
    assert_eq!(pod_sec["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(
        int(&pod_sec["runAsUser"], "runAsUser"),
        dockerfile_uid() as i64
    );
    let sec = &ctr["securityContext"];
    assert_eq!(sec["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(sec["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(
        spec["template"]["spec"]["enableServiceLinks"].as_bool(),
        Some(false),
        "Service variables would land in RUSH_*"
    );
}

#[test]
fn services_and_disruption_budget() {
    let sts = yaml(STS);
    let pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        .as_hash()
        .unwrap();
    let selects_pods = |svc: &Yaml| {
        for (k, v) in svc["spec"]["selector"].as_hash().expect("selector") {
            assert_eq!(pod_labels.get(k), Some(v), "selector matches the pods");
        }
    };
    let port_names: BTreeSet<&str> = list(&container(&sts)["ports"], "ports")
        .iter()
        .map(|p| s(&p["name"], "port name"))
        .collect();

    let headless = yaml("k8s/service-headless.yaml");
    assert_eq!(
        s(&headless["metadata"]["name"], "name"),
        s(&sts["spec"]["serviceName"], "serviceName"),
        "the StatefulSet's governing Service"
    );
    assert_eq!(s(&headless["spec"]["clusterIP"], "clusterIP"), "None");
    assert_eq!(
        headless["spec"]["publishNotReadyAddresses"].as_bool(),
        Some(true)
    );
    let client = yaml("k8s/service-client.yaml");
    for svc in [&headless, &client] {
        selects_pods(svc);
        for p in list(&svc["spec"]["ports"], "service ports") {
            let target = s(&p["targetPort"], "targetPort");
            assert!(port_names.contains(target), "targetPort {target} exists");
        }
    }

    // The replicas' governing Service selects their pods, not the
    // primaries'; the client Service selects the primaries' only.
    let replicas = yaml(REPLICA_STS);
    let replica_labels = replicas["spec"]["template"]["metadata"]["labels"]
        .as_hash()
        .unwrap();
    let replica_headless = yaml("k8s/service-headless-replica.yaml");
    assert_eq!(
        s(&replica_headless["metadata"]["name"], "name"),
        s(&replicas["spec"]["serviceName"], "serviceName")
    );
    assert_eq!(
        s(&replica_headless["spec"]["clusterIP"], "clusterIP"),
        "None"
    );
    let selects = |svc: &Yaml, labels: &yaml_rust2::yaml::Hash| {
        svc["spec"]["selector"]
            .as_hash()
            .expect("selector")
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    };
    assert!(selects(&replica_headless, replica_labels));
    assert!(!selects(&replica_headless, pod_labels));
    assert!(
        !selects(&client, replica_labels),
        "clients enter at primaries"
    );
    assert!(!selects(&headless, replica_labels));
    // Two StatefulSets must not select each other's pods.
    for (a, b) in [(&sts, replica_labels), (&replicas, pod_labels)] {
        let sel = a["spec"]["selector"]["matchLabels"].as_hash().unwrap();
        assert!(!sel.iter().all(|(k, v)| b.get(k) == Some(v)));
    }

    // One budget over both: a drain never takes a node and its replica.
    let pdb = yaml("k8s/pdb.yaml");
    assert_eq!(s(&pdb["kind"], "kind"), "PodDisruptionBudget");
    assert_eq!(int(&pdb["spec"]["maxUnavailable"], "maxUnavailable"), 1);
    assert!(pdb["spec"]["minAvailable"].is_badvalue());
    let sel = pdb["spec"]["selector"]["matchLabels"].as_hash().unwrap();
    for (k, v) in sel {
        assert_eq!(pod_labels.get(k), Some(v), "PDB selects the pods");
        assert_eq!(replica_labels.get(k), Some(v), "and the replicas");
    }
}

/// The replicas' StatefulSet is the primaries' but for its names and its
/// placement: either set holds primaries after failovers. Each replica
/// never shares a machine with its primary (same pod index).
#[test]
fn replica_statefulset_mirrors_the_primaries() {
    let primaries = yaml(STS);
    let replicas = yaml(REPLICA_STS);
    let (name, rname) = (
        s(&primaries["metadata"]["name"], "name"),
        s(&replicas["metadata"]["name"], "name"),
    );
    assert_eq!(rname, format!("{name}-replica"));
    assert_eq!(
        primaries["spec"]["replicas"], replicas["spec"]["replicas"],
        "a replica per node"
    );
    // The same container but for the advertised Service name.
    let advertise = |sts: &Yaml| -> Vec<String> {
        list(&container(sts)["args"], "args")
            .iter()
            .map(|a| s(a, "arg").to_string())
            .collect()
    };
    let want: Vec<String> = advertise(&primaries)
        .into_iter()
        .map(|a| a.replace(".rush.$(POD_NAMESPACE)", ".rush-replica.$(POD_NAMESPACE)"))
        .collect();
    assert_eq!(advertise(&replicas), want);
    let mut a = container(&primaries).clone();
    let mut b = container(&replicas).clone();
    for c in [&mut a, &mut b] {
        if let Yaml::Hash(h) = c {
            h.remove(&Yaml::String("args".into()));
        }
    }
    assert_eq!(a, b, "the containers differ only in --advertise");
    // The pod specs differ only in their affinity.
    let pod = |sts: &Yaml| {
        let mut p = sts["spec"]["template"]["spec"].clone();
        if let Yaml::Hash(h) = &mut p {
            h.remove(&Yaml::String("affinity".into()));
            h.remove(&Yaml::String("containers".into()));
        }
        p
    };
    assert_eq!(pod(&primaries), pod(&replicas));
    for key in [
        "podManagementPolicy",
        "updateStrategy",
        "minReadySeconds",
        "persistentVolumeClaimRetentionPolicy",
    ] {
        assert_eq!(primaries["spec"][key], replicas["spec"][key], "{key}");
    }
    assert_eq!(
        primaries["spec"]["volumeClaimTemplates"][0]["spec"],
        replicas["spec"]["volumeClaimTemplates"][0]["spec"]
    );
    // Required: not on the machine of the primary of the same index.
    let required = list(
        &replicas["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"],
        "required anti-affinity",
    );
    let primary_labels = primaries["spec"]["template"]["metadata"]["labels"]
        .as_hash()
        .unwrap();
    assert!(required.iter().any(|t| {
        s(&t["topologyKey"], "topologyKey") == "kubernetes.io/hostname"
            && t["labelSelector"]["matchLabels"]
                .as_hash()
                .is_some_and(|m| m.iter().all(|(k, v)| primary_labels.get(k) == Some(v)))
            && list(&t["matchLabelKeys"], "matchLabelKeys")
                .iter()
                .any(|k| k.as_str() == Some("apps.kubernetes.io/pod-index"))
    }));
    // The replication listener is a named port of both.
    let repl = port_of(&configmap_config().replication.listen) as i64;
    for sts in [&primaries, &replicas] {
        assert_eq!(
            int(
                &named(&container(sts)["ports"], "repl", "ports")["containerPort"],
                "repl"
            ),
            repl
        );
    }
}

/// `kubernetes-validate` (PyPI; `scripts/ensure-deps --redis-py` puts it
/// in the tests' virtual environment) checks every object `kubectl apply
/// -k deploy/k8s` creates against Kubernetes' own schemas, strictly, for
/// the oldest release the manifests need (1.31: matchLabelKeys in pod
/// anti-affinity) and the newest it knows.
#[test]
fn manifests_pass_kubernetes_validate() {
    let Some(tool) = common::venv_tool("kubernetes-validate") else {
        return;
    };
    let k = yaml("k8s/kustomization.yaml");
    let mut files: Vec<String> = list(&k["resources"], "resources")
        .iter()
        .map(|r| {
            deploy()
                .join("k8s")
                .join(s(r, "resource"))
                .display()
                .to_string()
        })
        .collect();
    files.push(
        deploy()
            .join("k8s/secret.example.yaml")
            .display()
            .to_string(),
    );
    for version in [Some("1.31.0"), None] {
        let mut cmd = std::process::Command::new(&tool);
        cmd.arg("--strict");
        if let Some(v) = version {
            cmd.args(["-k", v]);
        }
        let out = cmd.args(&files).output().expect("kubernetes-validate runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "kubernetes-validate {version:?}:\n{text}"
        );
        assert_eq!(
            text.matches(" passed ").count(),
            files.len(),
            "every object checked against a schema ({version:?}):\n{text}"
        );
    }
}

/// `"a-b"` or `"a"` → inclusive range.
fn slot_range(text: &str) -> (u16, u16) {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    let (a, b): (u16, u16) = (a.trim().parse().unwrap(), b.trim().parse().unwrap());
    assert!(a <= b, "range {text}");
    (a, b)
}

#[test]
fn cluster_map_covers_every_slot_once_with_the_pods_names() {
    let map: toml::Table = configmap_file("cluster.toml")
        .parse()
        .expect("cluster.toml parses");
    assert!(map["epoch"].as_integer().unwrap() >= 1);
    let nodes = map["nodes"].as_array().expect("[[nodes]]");

    let sts = yaml(STS);
    let name = s(&sts["metadata"]["name"], "StatefulSet name");
    let service = s(&sts["spec"]["serviceName"], "serviceName");
    let replicas = int(&sts["spec"]["replicas"], "replicas") as usize;
    let ns = kustomization_namespace();
    let port = port_of(&configmap_config().server.listen);
    assert_eq!(
        nodes.len(),
        2 * replicas,
        "one map entry per pod, and per replica"
    );
    // The replicas: rush-replica-N follows rush-N, owns nothing.
    let rsts = yaml(REPLICA_STS);
    let rname = s(&rsts["metadata"]["name"], "replicas' name");
    let rservice = s(&rsts["spec"]["serviceName"], "replicas' serviceName");
    for (i, node) in nodes[replicas..].iter().enumerate() {
        assert_eq!(node["id"].as_str(), Some(format!("{rname}-{i}").as_str()));
        assert_eq!(
            node["addr"].as_str(),
            Some(format!("{rname}-{i}.{rservice}.{ns}.svc:{port}").as_str())
        );
        assert_eq!(
            node["replica_of"].as_str(),
            Some(format!("{name}-{i}").as_str())
        );
        assert!(node.get("slots").is_none(), "a replica owns no slots");
    }
    // And the map parses as rushd reads it.
    let parsed =
        rush_client::protocol::cmd::cluster::file::parse_map(&configmap_file("cluster.toml"))
            .expect("cluster.toml is a valid map");
    assert_eq!(parsed.replicas_of(&format!("{name}-0")).count(), 1);

    let mut owner = vec![None; 16384];
    let mut sizes = Vec::new();
    for (i, node) in nodes[..replicas].iter().enumerate() {
        let id = node["id"].as_str().expect("id");
        assert_eq!(
            id,
            format!("{name}-{i}"),
            "ids are the pod names (RUSH_NODE_ID)"
        );
        assert_eq!(
            node["addr"].as_str().expect("addr"),
            format!("{name}-{i}.{service}.{ns}.svc:{port}"),
            "addresses are what the pods advertise"
        );
        let mut size = 0;
        for r in node["slots"].as_array().expect("slots") {
            let (a, b) = slot_range(r.as_str().expect("slot range"));
            assert!(b < 16384, "slot {b} out of range");
            for slot in a..=b {
                if let Some(other) = owner[slot as usize].replace(id) {
                    panic!("slot {slot} owned by {other} and {id}");
                }
                size += 1;
            }
        }
        sizes.push(size);
    }
    let missing: Vec<usize> = (0..16384).filter(|&s| owner[s].is_none()).collect();
    assert!(
        missing.is_empty(),
        "unowned slots, first {:?}",
        missing.first()
    );
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max - min <= 1, "slots split evenly: {sizes:?}");
}

#[test]
fn kustomization_and_secret_example() {
    let k = yaml("k8s/kustomization.yaml");
    let resources: BTreeSet<&str> = list(&k["resources"], "resources")
        .iter()
        .map(|r| s(r, "resource"))
        .collect();
    for r in &resources {
        assert!(deploy().join("k8s").join(r).exists(), "{r} exists");
    }
    let mut files = BTreeSet::new();
    for e in std::fs::read_dir(deploy().join("k8s")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if e.file_type().unwrap().is_dir() {
            // A kustomization of its own (monitoring/: it needs CRDs that
            // `kubectl apply -k deploy/k8s` must not depend on).
            assert!(!resources.contains(name.as_str()), "{name}/ stays apart");
            assert!(e.path().join("kustomization.yaml").exists(), "{name}/");
            continue;
        }
        files.insert(name);
    }
    for f in &files {
        match f.as_str() {
            "kustomization.yaml" => {}
            // Never applied by `kubectl apply -k`: it would overwrite real
            // tokens with placeholders.
            "secret.example.yaml" => assert!(!resources.contains(f.as_str())),
            f => assert!(resources.contains(f), "{f} is listed in kustomization.yaml"),
        }
    }
    let sts = yaml(STS);
    let image = s(&container(&sts)["image"], "image");
    assert!(list(&k["images"], "images")
        .iter()
        .any(|i| i["name"].as_str() == Some(image)));
    let namespace = yaml("k8s/namespace.yaml");
    assert_eq!(
        s(&namespace["metadata"]["name"], "namespace"),
        kustomization_namespace()
    );

    // The placeholders are comments: a token file without a token stops
    // rushd at start, so the example can't run with a guessable token.
    let secret = yaml("k8s/secret.example.yaml");
    let data = secret["stringData"].as_hash().expect("stringData");
    assert!(!data.is_empty());
    for (key, value) in data {
        let text = s(value, "token file");
        assert!(text.contains("PLACEHOLDER"), "{key:?} is marked");
        assert!(
            text.lines()
                .map(str::trim)
                .all(|l| l.is_empty() || l.starts_with('#')),
            "{key:?} holds only comments"
        );
    }
}

// ------------------------------------------------------ Dockerfile ----

/// Dockerfile instructions (continuation lines joined, comments dropped).
fn dockerfile() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in read("Dockerfile").lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                cur.push_str(part);
                cur.push(' ');
            }
            None => {
                cur.push_str(t);
                let (instr, rest) = cur.split_once(' ').unwrap_or((&cur, ""));
                out.push((instr.to_uppercase(), rest.trim().to_string()));
                cur.clear();
            }
        }
    }
    out
}

fn dockerfile_uid() -> u32 {
    let users: Vec<String> = dockerfile()
        .into_iter()
        .filter(|(i, _)| i == "USER")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(users.len(), 1, "one USER");
    users[0]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("numeric USER (runAsNonRoot can verify it)")
}

#[test]
fn dockerfile_matches_the_image_config() {
    let instrs = dockerfile();
    // The runtime stage: everything after the last FROM.
    let last_from = instrs.iter().rposition(|(i, _)| i == "FROM").unwrap();
    let runtime = &instrs[last_from..];
    let all_in = |instrs: &[(String, String)], name: &str| -> Vec<String> {
        instrs
            .iter()
            .filter(|(i, _)| i == name)
            .map(|(_, r)| r.clone())
            .collect()
    };
    let all = |name: &str| all_in(&instrs, name);
    let one = |name: &str| -> String {
        let v = all_in(runtime, name);
        assert_eq!(v.len(), 1, "one {name}: {v:?}");
        v[0].clone()
    };
    let c = Config::load(&deploy().join("container.toml")).expect("container.toml");
    c.validate().expect("valid");

    // Multi-stage: a Rust builder with libclang, a slim Debian runtime.
    let froms = all("FROM");
    assert_eq!(froms.len(), 2, "build and runtime stages");
    assert!(froms[0].starts_with("rust:") && froms[0].ends_with(" AS build"));
    assert!(froms[1].starts_with("debian:") && froms[1].contains("-slim"));
    let runs = all("RUN").join("\n");
    assert!(runs.contains("libclang-dev"));
    assert!(runs.contains("cargo build --release --locked"));
    assert!(runs.contains("--bin rushd") && runs.contains("--bin rush "));

    // The built-in config is the one checked here.
    assert!(all("COPY").contains(&"deploy/container.toml /etc/rush/rushd.toml".to_string()));
    assert!(one("ENV").contains("RUSH_CONFIG=/etc/rush/rushd.toml"));

    let uid = dockerfile_uid();
    assert_ne!(uid, 0, "not root");
    let exposed: BTreeSet<u16> = one("EXPOSE")
        .split_whitespace()
        .map(|p| p.trim_end_matches("/tcp").parse().unwrap())
        .collect();
    assert_eq!(
        exposed,
        BTreeSet::from([port_of(&c.server.listen), port_of(&c.server.http)]),
        "EXPOSE = the config's listeners"
    );
    let volume = one("VOLUME");
    assert!(
        volume.contains(&format!("\"{}\"", c.storage.data_dir.display())),
        "VOLUME {volume} is data_dir"
    );
    assert_eq!(one("WORKDIR"), c.storage.data_dir.display().to_string());
    // The health check follows the configured HTTP address (rushd health
    // reads the same config; `rushd_health_follows_the_config` runs it):
    // no port of its own, and no curl in the image for it.
    let health = one("HEALTHCHECK");
    assert!(
        health.contains(r#"CMD ["rushd", "health""#),
        "HEALTHCHECK {health}"
    );
    assert!(
        !health.contains(&port_of(&c.server.http).to_string()),
        "HEALTHCHECK {health} names no port"
    );
    let runtime_runs = all_in(runtime, "RUN").join("\n");
    assert!(!runtime_runs.contains("curl"), "no curl in the image");
    // The image reports the commit it was built from.
    assert!(all("ARG").iter().any(|a| a.starts_with("RUSH_COMMIT")));
    assert!(runs.contains("RUSH_BUILD_COMMIT=\"${RUSH_COMMIT}\""));
    assert_eq!(one("STOPSIGNAL"), "SIGTERM");
    assert_eq!(one("ENTRYPOINT"), r#"["rushd"]"#);

    // The build context keeps target/ out and everything the build needs in.
    let ignore = std::fs::read_to_string(deploy().join("../.dockerignore")).expect(".dockerignore");
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(patterns.contains(&"target") && patterns.contains(&".git"));
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        ".cargo",
        "protocol",
        "daemon",
        "client",
        "bench",
        "deploy",
    ] {
        assert!(!patterns.contains(&needed), "{needed} must reach the build");
    }
}

// ---------------------------------------------------------- systemd ----

#[test]
fn systemd_unit_is_hardened_and_outlasts_the_drain() {
    let text = read("rushd.service");
    let mut keys: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (k, v) = line.split_once('=').expect("key=value");
        keys.entry((section.clone(), k.trim().to_string()))
            .or_default()
            .push(v.trim().to_string());
    }
    let get = |k: &str| -> Vec<String> {
        keys.get(&("Service".to_string(), k.to_string()))
            .cloned()
            .unwrap_or_else(|| panic!("[Service] {k}= missing"))
    };
    let last = |k: &str| get(k).last().unwrap().clone();

    assert!(
        last("DynamicUser") == "yes" || keys.contains_key(&("Service".into(), "User".into())),
        "an unprivileged user"
    );
    assert_eq!(last("StateDirectory"), "rush");
    assert_eq!(last("ProtectSystem"), "strict");
    assert!(matches!(
        last("ProtectHome").as_str(),
        "yes" | "read-only" | "tmpfs"
    ));
    assert_eq!(last("PrivateTmp"), "yes");
    assert_eq!(last("NoNewPrivileges"), "yes");
    assert_eq!(last("CapabilityBoundingSet"), "", "no capabilities");
    let families = last("RestrictAddressFamilies");
    assert!(families.contains("AF_INET") && !families.contains("AF_PACKET"));
    assert!(get("SystemCallFilter").contains(&"@system-service".to_string()));
    assert_eq!(last("KillSignal"), "SIGTERM");
    assert_eq!(last("Restart"), "on-failure");
    assert!(last("ExecStart").contains("--config /etc/rush/rushd.toml"));
    assert!(get("Environment").contains(&"RUSH_DATA=%S/rush".to_string()));

    // /etc/rush/rushd.toml is installed from deploy/rushd.toml.
    let c = Config::load(&deploy().join("rushd.toml")).unwrap();
    let nofile: usize = last("LimitNOFILE").parse().expect("a number");
    assert!(
        nofile > c.server.max_connections,
        "fds for every connection"
    );
    let stop: u64 = last("TimeoutStopSec")
        .trim_end_matches('s')
        .parse()
        .expect("seconds");
    let drain = c.server.drain_timeout_secs;
    assert!(
        stop > DRAIN_TIMEOUTS_PER_STOP * drain,
        "TimeoutStopSec {stop} must exceed {DRAIN_TIMEOUTS_PER_STOP} x drain_timeout_secs {drain}"
    );
}

// ------------------------------------------------------- Prometheus ----

/// Labels Prometheus adds to every series of a target (scrape config).
const TARGET_LABELS: [&str; 4] = ["job", "instance", "namespace", "pod"];

struct Rule {
    name: String,
    expr: String,
}

fn alert_rules() -> Vec<Rule> {
    let doc = yaml("prometheus/rush-alerts.yml");
    let mut rules = Vec::new();
    for group in list(&doc["groups"], "groups") {
        s(&group["name"], "group name");
        for r in list(&group["rules"], "rules") {
            let name = s(&r["alert"], "alert").to_string();
            assert!(
                matches!(
                    s(&r["labels"]["severity"], "severity"),
                    "warning" | "critical"
                ),
                "{name}: severity"
            );
            s(&r["annotations"]["summary"], "summary");
            s(&r["annotations"]["description"], "description");
            rules.push(Rule {
                name,
                expr: s(&r["expr"], "expr").to_string(),
            });
        }
    }
    rules
}

#[test]
fn alert_rules_cover_the_issue_and_mirror_the_config() {
    let rules = alert_rules();
    let names: BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names.len(), rules.len(), "alert names are unique");
    for required in [
        "RushNodeDown",
        "RushShardQueueSaturated",
        "RushCommitLatencyHigh",
        "RushBloomFalsePositiveDrift",
        "RushRefundBacklog",
        "RushSegmentWaits",
        "RushStorageWriteErrors",
        "RushAuthFailures",
        "RushSlotMigrationUnresolved",
        "RushSlotMigrationFailed",
        "RushClusterEpochSkew",
        "RushReplicaLagging",
        "RushPrimaryWithoutReplica",
        "RushReplicationDegraded",
    ] {
        assert!(names.contains(required), "{required} is defined");
    }
    for r in &rules {
        promql::parse(&r.expr).unwrap_or_else(|e| panic!("{}: {e}\n{}", r.name, r.expr));
    }
    let expr = |name: &str| &rules.iter().find(|r| r.name == name).unwrap().expr;
    assert!(expr("RushNodeDown").contains("up{"));
    // Thresholds that mirror settings use the deployed values.
    let c = configmap_config();
    let defaults = Config::default();
    assert_eq!(c.storage.queue_depth, defaults.storage.queue_depth);
    assert!(expr("RushShardQueueSaturated").contains(&format!("* {}", c.storage.queue_depth)));
    assert_eq!(c.catalog.bloom_fp_rate, defaults.catalog.bloom_fp_rate);
    assert!(expr("RushBloomFalsePositiveDrift").contains(&format!("* {}", c.catalog.bloom_fp_rate)));
    assert!(expr("RushConnectionsNearLimit").contains(&format!("* {}", c.server.max_connections)));
}

#[test]
fn scrape_config_finds_the_pods() {
    let p = yaml("prometheus/prometheus.yml");
    let rule_files = list(&p["rule_files"], "rule_files");
    for f in rule_files {
        assert!(deploy().join("prometheus").join(s(f, "rule file")).exists());
    }
    let job = &list(&p["scrape_configs"], "scrape_configs")[0];
    assert!(
        s(&job["job_name"], "job_name").starts_with("rush"),
        "alerts select job=~\"rush.*\""
    );
    let sd = &list(&job["kubernetes_sd_configs"], "kubernetes_sd_configs")[0];
    assert_eq!(s(&sd["role"], "role"), "pod");
    let namespaces = list(&sd["namespaces"]["names"], "namespaces");
    assert_eq!(s(&namespaces[0], "namespace"), kustomization_namespace());

    let sts = yaml(STS);
    let relabel = list(&job["relabel_configs"], "relabel_configs");
    let keep = |source: &str| -> String {
        relabel
            .iter()
            .find(|r| {
                r["action"].as_str() == Some("keep")
                    && r["source_labels"][0].as_str() == Some(source)
            })
            .map(|r| s(&r["regex"], "regex").to_string())
            .unwrap_or_else(|| panic!("no keep on {source}"))
    };
    // The kept port is the container port of the HTTP listener.
    let port_name = keep("__meta_kubernetes_pod_container_port_name");
    let http = port_of(&configmap_config().server.http) as i64;
    let ctr = container(&sts);
    assert_eq!(
        int(
            &named(&ctr["ports"], &port_name, "ports")["containerPort"],
            "port"
        ),
        http
    );
    let app = keep("__meta_kubernetes_pod_label_app_kubernetes_io_name");
    let kept: BTreeSet<String> = app.split('|').map(String::from).collect();
    let names: BTreeSet<String> = [yaml(STS), yaml(REPLICA_STS)]
        .iter()
        .map(|sts| {
            s(
                &sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"],
                "pod name label",
            )
            .to_string()
        })
        .collect();
    assert_eq!(kept, names, "the primaries' pods and the replicas'");
}

// ---------------------------------------------------------- Grafana ----

/// Every PromQL query of the dashboard, Grafana's variables replaced by
/// values that parse.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = read("grafana/rush-dashboard.json");
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let subst = |e: &str| {
        e.replace("$__rate_interval", "5m")
            .replace("$__interval", "1m")
            .replace("$__range", "1h")
            .replace("${instance}", ".*")
            .replace("$instance", ".*")
    };
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        let title = p["title"].as_str().expect("title").to_string();
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            out.push((title.clone(), subst(t["expr"].as_str().expect("expr"))));
        }
    }
    // Template variables: label_values(SELECTOR, label).
    for v in d["templating"]["list"].as_array().unwrap() {
        // A string (the classic form) or {"query": ...} (newer editors).
        let q = v["query"].as_str().or_else(|| v["query"]["query"].as_str());
        if let Some(q) = q.filter(|_| v["type"] == "query") {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map(|(sel, _)| sel)
                .expect("label_values(selector, label)");
            out.push((format!("variable {}", v["name"]), inner.to_string()));
        }
    }
    out
}

#[test]
fn dashboard_is_well_formed() {
    let text = read("grafana/rush-dashboard.json");
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(d["uid"].is_string() && d["title"].is_string());
    let panels = d["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    let mut rows = Vec::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("id")), "ids are unique");
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
        assert!(x + w <= 24, "{} fits the grid", p["title"]);
        if p["type"] == "row" {
            rows.push(p["title"].as_str().unwrap().to_string());
        }
    }
    for service in ["Short links", "Purchase limits", "Catalog", "Red envelopes"] {
        assert!(
            rows.iter().any(|r| r.starts_with(service)),
            "a row for {service}"
        );
    }
    for row in ["Cluster", "Process"] {
        assert!(rows.iter().any(|r| r == row), "a row for the {row}");
    }
    for (title, q) in dashboard_queries() {
        promql::parse(&q).unwrap_or_else(|e| panic!("{title}: {e}\n{q}"));
    }
}

// ------------------------------------- metric names against a real node ----

/// What a node's `/metrics` holds: metric name → label names, and
/// (metric, label) → values.
#[derive(Default)]
struct Exported {
    labels: BTreeMap<String, BTreeSet<String>>,
    values: BTreeMap<(String, String), BTreeSet<String>>,
    /// Every sample: its name and labels.
    series: Vec<(String, BTreeMap<String, String>)>,
}

fn exposition(text: &str) -> Exported {
    let mut out = Exported::default();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).expect("sample line");
        let name = line[..end].to_string();
        out.labels.entry(name.clone()).or_default();
        out.series.push((name.clone(), BTreeMap::new()));
        if !line[end..].starts_with('{') {
            continue;
        }
        // name="value",... where a quoted value may hold , } or \".
        let mut rest = &line[end + 1..];
        while let Some(eq) = rest.find('=') {
            let label = rest[..eq].trim_start_matches(',').to_string();
            let value_start = eq + 2;
            let mut close = None;
            let mut chars = rest[value_start..].char_indices();
            while let Some((i, ch)) = chars.next() {
                match ch {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        close = Some(value_start + i);
                        break;
                    }
                    _ => {}
                }
            }
            let close = close.expect("closing quote");
            let value = rest[value_start..close].to_string();
            let sample = &mut out.series.last_mut().expect("this sample").1;
            sample.insert(label.clone(), value);
            out.labels.get_mut(&name).unwrap().insert(label.clone());
            out.values
                .entry((name.clone(), label))
                .or_default()
                .insert(rest[value_start..close].to_string());
            rest = &rest[close + 1..];
            if rest.starts_with('}') {
                break;
            }
        }
    }
    out
}

/// A metric rushd exports (rather than Prometheus itself, like `up`).
fn exported_by_rushd(name: &str) -> bool {
    name.starts_with("rush_") || name.starts_with("process_")
}

/// Where an expression's metrics and labels are checked against the node.
struct Checker<'a> {
    exported: &'a Exported,
    problems: Vec<String>,
    used: BTreeSet<String>,
}

impl Checker<'_> {
    /// Labels the series of `expr` can carry; records problems on the way.
    fn walk(&mut self, expr: &Expr, ctx: &str) -> BTreeSet<String> {
        match expr {
            Expr::VectorSelector(vs) => self.selector(vs, ctx),
            Expr::MatrixSelector(ms) => self.selector(&ms.vs, ctx),
            Expr::Aggregate(a) => {
                let inner = self.walk(&a.expr, ctx);
                if let Some(p) = &a.param {
                    self.walk(p, ctx);
                }
                match &a.modifier {
                    Some(LabelModifier::Include(by)) => {
                        for l in &by.labels {
                            if !inner.contains(l) {
                                self.problems
                                    .push(format!("{ctx}: by ({l}): no such label in {}", a.expr));
                            }
                        }
                        by.labels.iter().cloned().collect()
                    }
                    Some(LabelModifier::Exclude(_)) => inner,
                    None => BTreeSet::new(),
                }
            }
            Expr::Binary(b) => {
                let l = self.walk(&b.lhs, ctx);
                let r = self.walk(&b.rhs, ctx);
                if let Some(LabelModifier::Include(on)) =
                    b.modifier.as_ref().and_then(|m| m.matching.as_ref())
                {
                    for lab in &on.labels {
                        if !l.contains(lab) || !r.contains(lab) {
                            self.problems
                                .push(format!("{ctx}: on ({lab}) missing on a side"));
                        }
                    }
                }
                if l.is_empty() {
                    r
                } else {
                    l
                }
            }
            Expr::Paren(p) => self.walk(&p.expr, ctx),
            Expr::Unary(u) => self.walk(&u.expr, ctx),
            Expr::Subquery(sq) => self.walk(&sq.expr, ctx),
            Expr::Call(c) => {
                let mut labels = BTreeSet::new();
                for a in &c.args.args {
                    labels.extend(self.walk(a, ctx));
                }
                if c.func.name == "histogram_quantile" {
                    labels.remove("le");
                }
                labels
            }
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => BTreeSet::new(),
        }
    }

    fn selector(&mut self, vs: &promql::VectorSelector, ctx: &str) -> BTreeSet<String> {
        let name = vs.name.clone().or_else(|| {
            vs.matchers
                .matchers
                .iter()
                .find(|m| m.name == "__name__")
                .map(|m| m.value.clone())
        });
        let Some(name) = name else {
            self.problems
                .push(format!("{ctx}: selector without a metric name"));
            return BTreeSet::new();
        };
        let mut labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| l.to_string()).collect();
        if !exported_by_rushd(&name) {
            // Prometheus' own (up): target labels only.
            return labels;
        }
        self.used.insert(name.clone());
        let all: &Exported = self.exported;
        let Some(exported) = all.labels.get(&name) else {
            self.problems
                .push(format!("{ctx}: {name} is not exported by rushd"));
            return labels;
        };
        labels.extend(exported.iter().cloned());
        for m in &vs.matchers.matchers {
            self.matcher(&name, exported, m, ctx);
        }
        labels
    }

    fn matcher(&mut self, metric: &str, exported: &BTreeSet<String>, m: &Matcher, ctx: &str) {
        if m.name == "__name__" || TARGET_LABELS.contains(&m.name.as_str()) {
            return;
        }
        if !exported.contains(&m.name) {
            self.problems
                .push(format!("{ctx}: {metric} has no label {}", m.name));
        }
        // Values of outcome labels of rush_requests_total: "ok" or an error
        // code name; other values must be spelled as the daemon spells them.
        let values: Vec<&str> = match &m.op {
            MatchOp::Equal | MatchOp::NotEqual => vec![m.value.as_str()],
            MatchOp::Re(_) | MatchOp::NotRe(_)
                if m.value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_|".contains(c)) =>
            {
                m.value.split('|').collect()
            }
            _ => vec![],
        };
        for v in values {
            let known = if metric == "rush_requests_total" && m.name == "outcome" {
                v == "ok" || rush_protocol::ErrorCode::ALL.iter().any(|c| c.name() == v)
            } else {
                self.exported
                    .values
                    .get(&(metric.to_string(), m.name.clone()))
                    .is_some_and(|vals| vals.contains(v))
            };
            if !known {
                self.problems.push(format!(
                    "{ctx}: {metric}{{{}=\"{v}\"}} is never exported",
                    m.name
                ));
            }
        }
    }
}

/// Scrape a node until `ready` accepts its metrics (lazily created series
/// appear after the traffic that creates them), at most a few seconds.
async fn scrape_until(http: SocketAddr, ready: impl Fn(&Exported) -> bool) -> (String, Exported) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = common::http_get(http, "/metrics").await;
        assert_eq!(status, 200);
        let e = exposition(&body);
        if ready(&e) || std::time::Instant::now() > deadline {
            return (body, e);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A node running the Kubernetes config (loopback ports, a temp dir, no
/// token files, small caches) with the example's purchase-limit policies,
/// so per-policy series exist.
async fn deployed_node() -> common::TestNode {
    let policies = Config::load(&deploy().join("rushd.toml")).unwrap().limits;
    common::TestNode::start_with(|c| {
        let dir = c.storage.data_dir.clone();
        *c = configmap_config();
        c.server.listen = "127.0.0.1:0".into();
        c.server.http = "127.0.0.1:0".into();
        c.links.redirect_listen = "127.0.0.1:0".into();
        c.storage.data_dir = dir;
        // The ConfigMap's budget, scaled down for a test.
        c.memory.budget_mb = 256;
        c.catalog.bloom_expected_items = 10_000;
        c.auth = Default::default();
        c.limits = policies;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_in_the_rules_and_dashboard_is_exported() {
    use rush_client::protocol::cmd::OrderItem;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let node = deployed_node().await;
    let http = node.running().http_addr().expect("HTTP on");

    // Traffic for the series that exist only once something happened: a
    // redirect, a rejected frame (and its closed connection).
    let link = node
        .client
        .shorten("https://example.com/deploy")
        .await
        .unwrap();
    node.client.resolve(link.code.clone()).await.unwrap();
    let redirect = node.running().redirect_addr().expect("redirects on");
    let (status, _) = common::http_get(redirect, &format!("/{}", link.code)).await;
    assert!((300..400).contains(&status), "redirect answered {status}");
    node.client
        .limit_acquire(
            "flash-sale",
            "user-1",
            "order-1",
            [OrderItem::new("sku-1", 1)],
        )
        .await
        .unwrap();
    let mut raw = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    raw.write_all(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut sink = Vec::new();
    let _ = raw.read_to_end(&mut sink).await; // closed by the node

    let lazy = [
        "rush_links_redirects_total",
        "rush_frames_rejected_total",
        "rush_connections_closed_total",
    ];
    let (body, exported) =
        scrape_until(http, |e| lazy.iter().all(|m| e.labels.contains_key(*m))).await;
    for m in lazy {
        assert!(
            exported.labels.contains_key(m),
            "{m} after traffic:\n{body}"
        );
    }

    let mut checker = Checker {
        exported: &exported,
        problems: Vec::new(),
        used: BTreeSet::new(),
    };
    let mut queries: Vec<(String, String)> = alert_rules()
        .into_iter()
        .map(|r| (format!("alert {}", r.name), r.expr))
        .collect();
    queries.extend(dashboard_queries());
    for (ctx, q) in &queries {
        let expr = promql::parse(q).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        checker.walk(&expr, ctx);
    }
    assert!(
        checker.problems.is_empty(),
        "metrics or labels rushd doesn't export:\n{}",
        checker.problems.join("\n")
    );

    // The files use the metrics the issue names, histograms by their series.
    for m in [
        "rush_requests_total",
        "rush_request_duration_seconds_bucket",
        "rush_shard_queue_depth",
        "rush_shard_batch_size_bucket",
        "rush_storage_commit_seconds_bucket",
        "rush_storage_syncs_total",
        "rush_storage_write_errors_total",
        "rush_connections",
        "rush_auth_failures_total",
        "rush_catalog_bloom_false_positive_rate",
        "rush_links_segment_waits_total",
        "rush_envelope_refunds_written_total",
        "rush_envelope_refunds_acked_total",
        "rush_limit_acquires_total",
        "rush_cluster_epoch",
        "rush_cluster_slots_owned",
        "rush_cluster_migration_failures_total",
        "rush_build_info",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(checker.used.contains(m), "{m} is used by a rule or panel");
    }
    for m in [
        "rush_cluster_epoch",
        "rush_cluster_migration_failures_total",
    ] {
        assert!(
            alert_rules().iter().any(|r| r.expr.contains(m)),
            "an alert uses {m}"
        );
    }
    // The check can fail: a metric, a label, a label value and a grouping
    // the node doesn't have are each caught.
    let mut probe = Checker {
        exported: &exported,
        problems: Vec::new(),
        used: BTreeSet::new(),
    };
    let bogus = promql::parse(
        "sum by (shard) (rate(rush_envelope_refunds_invented[5m])) \
         + sum by (op) (rush_requests_total{opcode=\"x\", outcome=\"TIMEOUT\"}) \
         + sum by (policy) (rate(rush_storage_syncs_total[5m]))",
    )
    .unwrap();
    probe.walk(&bogus, "probe");
    let found = probe.problems.join("\n");
    for expected in [
        "rush_envelope_refunds_invented is not exported",
        "rush_requests_total has no label opcode",
        "outcome=\"TIMEOUT\"} is never exported",
        "by (policy): no such label",
    ] {
        assert!(
            found.contains(expected),
            "{expected:?} not caught in:\n{found}"
        );
    }
    node.stop().await;
}

/// Every vector selector of an expression.
fn selectors<'e>(expr: &'e Expr, out: &mut Vec<&'e promql::VectorSelector>) {
    match expr {
        Expr::VectorSelector(vs) => out.push(vs),
        Expr::MatrixSelector(ms) => out.push(&ms.vs),
        Expr::Aggregate(a) => {
            selectors(&a.expr, out);
            if let Some(p) = &a.param {
                selectors(p, out);
            }
        }
        Expr::Binary(b) => {
            selectors(&b.lhs, out);
            selectors(&b.rhs, out);
        }
        Expr::Paren(p) => selectors(&p.expr, out),
        Expr::Unary(u) => selectors(&u.expr, out),
        Expr::Subquery(sq) => selectors(&sq.expr, out),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Selectors of rushd's metrics that match no series of `exported`.
fn unmatched(queries: &[(String, String)], exported: &Exported) -> Vec<String> {
    let mut missing = Vec::new();
    for (ctx, q) in queries {
        let expr = promql::parse(q).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let mut found = Vec::new();
        selectors(&expr, &mut found);
        for vs in found {
            let Some(name) = vs.name.as_deref().filter(|n| exported_by_rushd(n)) else {
                continue;
            };
            let matches = |labels: &BTreeMap<String, String>| {
                vs.matchers.matchers.iter().all(|m| {
                    m.name == "__name__"
                        || TARGET_LABELS.contains(&m.name.as_str())
                        || m.is_match(labels.get(&m.name).map_or("", String::as_str))
                })
            };
            if !exported.series.iter().any(|(n, l)| n == name && matches(l)) {
                missing.push(format!("{ctx}: {vs}"));
            }
        }
    }
    missing
}

/// An alert on a counter's rate or increase sees nothing of the event that
/// creates its series: every series the rules select must be there, at 0,
/// before anything happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_alerts_select_exist_before_any_traffic() {
    let node = deployed_node().await;
    let http = node.running().http_addr().expect("HTTP on");
    let (status, body) = common::http_get(http, "/metrics").await;
    assert_eq!(status, 200);
    let exported = exposition(&body);
    let rules: Vec<(String, String)> = alert_rules()
        .into_iter()
        .map(|r| (format!("alert {}", r.name), r.expr))
        .collect();
    let missing = unmatched(&rules, &exported);
    assert!(
        missing.is_empty(),
        "selected by alert rules, absent on a fresh node:\n{}",
        missing.join("\n")
    );
    // The check can fail: an outcome nothing has answered yet, a label
    // value no series has.
    let probe = [(
        "probe".to_string(),
        "rate(rush_requests_total{outcome=\"LIMITED\"}[5m]) + rush_cluster_migration_failures_total{outcome=\"lost\"}"
            .to_string(),
    )];
    let caught = unmatched(&probe, &exported);
    assert_eq!(caught.len(), 2, "{caught:?}");
    node.stop().await;
}

/// `promtool`, when installed (scripts/ensure-deps --promtool).
pub fn promtool() -> Option<&'static str> {
    let found = std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        common::prerequisite_missing(
            "promtool is not installed",
            "run scripts/ensure-deps --promtool (Debian package prometheus)",
        );
        return None;
    }
    Some("promtool")
}

#[test]
fn alert_rules_pass_promtool() {
    let Some(promtool) = promtool() else { return };
    let rules = deploy().join("prometheus/rush-alerts.yml");
    let out = std::process::Command::new(promtool)
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// --------------------------------------------- Prometheus Operator ----

/// The fields of a CRD's object (no schema to validate against here): each
/// key must be one the CRD defines, so a snake_case key copied from
/// prometheus.yml (`source_labels`) or a typo fails here, not silently in
/// the cluster.
fn only_keys(y: &Yaml, allowed: &[&str], what: &str) {
    for k in y
        .as_hash()
        .unwrap_or_else(|| panic!("{what}: a mapping"))
        .keys()
    {
        let k = s(k, what);
        assert!(allowed.contains(&k), "{what}: unknown field {k:?}");
    }
}

fn crd_object(y: &Yaml, kind: &str) {
    assert_eq!(
        s(&y["apiVersion"], "apiVersion"),
        "monitoring.coreos.com/v1"
    );
    assert_eq!(s(&y["kind"], "kind"), kind);
    only_keys(y, &["apiVersion", "kind", "metadata", "spec"], kind);
    s(&y["metadata"]["name"], "metadata.name");
    assert!(
        y["metadata"]["namespace"].is_badvalue(),
        "the kustomization sets it"
    );
}

#[test]
fn prometheus_operator_objects_match_the_rules_and_the_pods() {
    // Their own kustomization, in the pods' namespace, listing every file.
    let k = yaml("k8s/monitoring/kustomization.yaml");
    assert_eq!(s(&k["namespace"], "namespace"), kustomization_namespace());
    let resources: BTreeSet<String> = list(&k["resources"], "resources")
        .iter()
        .map(|r| s(r, "resource").to_string())
        .collect();
    let mut files = BTreeSet::new();
    for e in std::fs::read_dir(deploy().join("k8s/monitoring")).unwrap() {
        files.insert(e.unwrap().file_name().into_string().unwrap());
    }
    files.remove("kustomization.yaml");
    assert_eq!(
        resources, files,
        "every file listed, every listed file there"
    );

    // The PrometheusRule holds exactly the rule file's groups.
    let rule = yaml("k8s/monitoring/prometheusrule.yaml");
    crd_object(&rule, "PrometheusRule");
    only_keys(&rule["spec"], &["groups"], "PrometheusRule spec");
    let alerts = yaml("prometheus/rush-alerts.yml");
    assert!(
        rule["spec"]["groups"] == alerts["groups"],
        "deploy/k8s/monitoring/prometheusrule.yaml has drifted from \
         deploy/prometheus/rush-alerts.yml: regenerate it (its header says how)"
    );

    // The ServiceMonitor scrapes the HTTP listener of every pod, with the
    // labels the rules and prometheus.yml use.
    let sm = yaml("k8s/monitoring/servicemonitor.yaml");
    crd_object(&sm, "ServiceMonitor");
    let spec = &sm["spec"];
    only_keys(
        spec,
        &[
            "selector",
            "endpoints",
            "namespaceSelector",
            "jobLabel",
            "targetLabels",
            "podTargetLabels",
            "sampleLimit",
        ],
        "ServiceMonitor spec",
    );
    let endpoints = list(&spec["endpoints"], "endpoints");
    assert_eq!(endpoints.len(), 1, "one endpoint");
    let ep = &endpoints[0];
    only_keys(
        ep,
        &[
            "port",
            "path",
            "scheme",
            "interval",
            "scrapeTimeout",
            "honorLabels",
            "relabelings",
            "metricRelabelings",
        ],
        "ServiceMonitor endpoint",
    );
    assert_eq!(s(&ep["path"], "path"), "/metrics");
    let prometheus = yaml("prometheus/prometheus.yml");
    let job = &list(&prometheus["scrape_configs"], "scrape_configs")[0];
    assert_eq!(
        ep["interval"], job["scrape_interval"],
        "the scrape interval of prometheus.yml"
    );
    // The selector: label `app.kubernetes.io/name` in a list of values.
    let exprs = list(&spec["selector"]["matchExpressions"], "matchExpressions");
    assert_eq!(exprs.len(), 1, "{exprs:?}");
    assert_eq!(s(&exprs[0]["key"], "key"), "app.kubernetes.io/name");
    assert_eq!(s(&exprs[0]["operator"], "operator"), "In");
    let values: BTreeSet<&str> = list(&exprs[0]["values"], "values")
        .iter()
        .map(|v| s(v, "value"))
        .collect();
    let selected = |svc: &Yaml| {
        svc["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .is_some_and(|n| values.contains(n))
    };
    let port_name = s(&ep["port"], "endpoint port");
    let scraped: Vec<Yaml> = [
        "k8s/service-headless.yaml",
        "k8s/service-client.yaml",
        "k8s/service-headless-replica.yaml",
    ]
    .into_iter()
    .map(yaml)
    .filter(selected)
    .filter(|svc| {
        list(&svc["spec"]["ports"], "ports")
            .iter()
            .any(|p| p["name"].as_str() == Some(port_name))
    })
    .collect();
    assert_eq!(
        scraped.len(),
        2,
        "the two headless Services have the {port_name} port"
    );
    for (svc, sts) in scraped.iter().zip([yaml(STS), yaml(REPLICA_STS)]) {
        assert_eq!(
            svc["metadata"]["name"], sts["spec"]["serviceName"],
            "the headless Services: they list starting and draining pods too"
        );
        let target = s(
            &named(&svc["spec"]["ports"], port_name, "ports")["targetPort"],
            "targetPort",
        );
        assert_eq!(
            int(
                &named(&container(&sts)["ports"], target, "container ports")["containerPort"],
                "containerPort"
            ),
            port_of(&configmap_config().server.http) as i64,
            "the port of the HTTP listener"
        );
        assert!(s(&svc["metadata"]["name"], "name").starts_with("rush"));
    }
    // job: the Service's name unless jobLabel says otherwise; the rules
    // select job=~"rush.*".
    assert!(spec["jobLabel"].is_badvalue());
    // instance = the pod name, as prometheus.yml relabels it.
    let relabelings = list(&ep["relabelings"], "relabelings");
    for r in relabelings {
        only_keys(
            r,
            &[
                "sourceLabels",
                "separator",
                "targetLabel",
                "regex",
                "modulus",
                "replacement",
                "action",
            ],
            "relabeling",
        );
    }
    assert!(relabelings.iter().any(|r| {
        r["sourceLabels"][0].as_str() == Some("__meta_kubernetes_pod_name")
            && r["targetLabel"].as_str() == Some("instance")
    }));
}

// ------------------------------------------------- rushd health ----

/// `rushd ARGS… health` with only `env` set: its exit status and stderr.
fn rushd_health(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rushd"))
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("rushd runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The container's HEALTHCHECK: `rushd health` probes the HTTP address the
/// configuration gives, wherever that is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rushd_health_follows_the_config() {
    let http = common::fixed_listen_addr();
    let port = port_of(&http);
    let node = common::TestNode::start_with(|c| c.server.http = http.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rushd.toml");
    // As in the image: every interface in the file, probed on loopback.
    std::fs::write(&file, format!("[server]\nhttp = \"0.0.0.0:{port}\"\n")).unwrap();
    let file = file.to_str().unwrap();
    // The node serves from this runtime while the check blocks a worker.
    let health = |args: &[&str], env: &[(&str, &str)]| {
        tokio::task::block_in_place(|| rushd_health(args, env))
    };
    let (ok, err) = health(&["health"], &[("RUSH_CONFIG", file)]);
    assert!(ok, "{err}");
    let (ok, err) = health(&["--config", file, "health", "--ready"], &[]);
    assert!(ok, "{err}");
    let (ok, err) = health(&["health"], &[("RUSH_HTTP", http.as_str())]);
    assert!(ok, "{err}");
    // HTTP turned off, or a port nobody can know: a clear refusal.
    let (ok, err) = health(&["--http", "", "health"], &[]);
    assert!(!ok && err.contains("server.http is off"), "{err}");
    let (ok, err) = health(&["--http", "127.0.0.1:0", "health"], &[]);
    assert!(!ok && err.contains("can't know it"), "{err}");
    node.stop().await;
    // The node is gone: the check fails, naming the address.
    let (ok, err) = health(&["health", "--timeout", "1"], &[("RUSH_CONFIG", file)]);
    assert!(!ok, "the node is stopped");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}
