"""The recipes in deploy/ validated offline: the Kubernetes objects against the Kubernetes API
schemas that kubernetes-validate ships (strict: unknown fields are errors), the InferencePool
against the CRD schema vendored from gateway-api-inference-extension v1.5.0 (jsonschema), the
endpoint-picker values and the systemd unit against what they promise."""
import configparser
import pathlib
import re
import shutil
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT

K8S = ROOT / "deploy/kubernetes"
K8S_VERSION = "1.33.0"


def docs(name):
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def test_core_objects_validate_strictly():
    objs = docs("sluice.yaml")
    assert [o["kind"] for o in objs] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    for o in objs:
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)


def test_validation_catches_a_wrong_field():
    bad = docs("sluice.yaml")[0]
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/ready"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def arg(args, flag):
    return int(args[args.index(flag) + 1])


def test_probes_and_grace_period_cover_the_drain():
    dep = docs("sluice.yaml")[0]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    pre = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] > pre + arg(c["args"], "--drain-delay") + arg(c["args"], "--shutdown-timeout")
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_inferencepool_matches_the_vendored_crd_and_the_pods():
    crd = yaml.safe_load((K8S / "schemas/inference.networking.k8s.io_inferencepools-v1.5.0.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = version["schema"]["openAPIV3Schema"]
    (pool,) = docs("inferencepool.yaml")
    assert pool["apiVersion"] == f"{crd['spec']['group']}/v1" and pool["kind"] == crd["spec"]["names"]["kind"]
    jsonschema.validate(pool, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**pool, "spec": {**pool["spec"], "targetPorts": []}}, schema)
    dep = docs("sluice.yaml")[0]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = [p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]]
    assert pool["spec"]["targetPorts"][0]["number"] in ports


def test_endpoint_picker_reads_the_vllm_names_sluice_serves():
    values = yaml.safe_load((K8S / "epp-values.yaml").read_text())
    assert values["inferencePool"]["modelServerType"] == "vllm"   # the built-in mapping, no custom config
    ext = values["inferenceExtension"]
    cfg = yaml.safe_load(ext["pluginsCustomConfig"][ext["pluginsConfigFile"]])
    assert cfg["kind"] == "EndpointPickerConfig"
    types = {p["type"] for p in cfg["plugins"]}
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= types
    refs = {p["pluginRef"] for prof in cfg["schedulingProfiles"] for p in prof["plugins"]}
    assert refs <= types
    # The series behind those scorers are the ones src/server/vllm_metrics.cpp writes.
    src = (ROOT / "src/server/vllm_metrics.cpp").read_text()
    for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                 "vllm:cache_config_info", "block_size", "num_gpu_blocks"):
        assert name in src, name


def test_systemd_unit_stops_after_the_drain():
    unit = ROOT / "deploy/systemd/sluice.service"
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(unit.read_text())
    svc = cp["Service"]
    assert svc["Restart"] == "on-failure" and svc["KillSignal"] == "SIGTERM"
    args = svc["ExecStart"].split()
    assert int(svc["TimeoutStopSec"]) > arg(args, "--drain-delay") + arg(args, "--shutdown-timeout")
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
        # The binary path need not exist here; anything else systemd objects to fails the test.
        problems = [ln for ln in r.stderr.splitlines() if ln.strip() and "/usr/local/bin/sluice" not in ln]
        assert not problems, r.stderr
