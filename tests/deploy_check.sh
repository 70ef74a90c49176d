#!/usr/bin/env bash
# The deployment recipes of deploy/ checked offline (docs/operations.md,
# "Clusters"); each check skips cleanly where its tool is not installed:
#   deploy_config       deploy/ved.conf passes `ved --check-config`; every key of
#                       `ved --help` is documented there and in docs/operations.md
#   deploy_k8s_yaml     the manifests parse (Python yaml), every volumeMount names
#                       a volume of its pod, ved's socket dir is a host path
#   deploy_k8s_schema   ... and validate against deploy/kubernetes/schema (jsonschema;
#                       or kubeconform when KUBECONFORM_SCHEMAS names its schemas)
#   deploy_systemd      the units pass `systemd-analyze verify`
#   deploy_scripts      the shell recipes pass bash -n (and shellcheck, if there)
#   deploy_container    every file the Containerfile copies exists
#   tests/deploy_check.sh ROOT BUILD
set -u
. "$(dirname "$0")/sh_harness.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ve-deploy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- deploy_config
if [ ! -x "$build/ved" ]; then
	skip deploy_config "no $build/ved"
else
	bad=""
	out=$(env -u VE_VED_POLICY "$build/ved" --check-config --config "$root/deploy/ved.conf" 2>&1) ||
		bad="$bad check-config: $out"
	keys=$("$build/ved" --help | sed -n '/^configuration keys/,$p' | sed -n 's/^  \([a-z_]*\) .*/\1/p')
	[ -n "$keys" ] || bad="$bad no-keys-in-help"
	for k in $keys; do
		grep -Eq "^#?$k = " "$root/deploy/ved.conf" || bad="$bad ved.conf:$k"
		grep -q "| \`$k\` |" "$root/docs/operations.md" || bad="$bad operations.md:$k"
	done
	if [ -z "$bad" ]; then ok deploy_config; else fail deploy_config "$bad"; fi
fi

# ---- deploy_k8s_yaml and deploy_k8s_schema
manifests=$(ls "$root"/deploy/kubernetes/*.yaml)
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import yaml' 2>/dev/null; then
	skip deploy_k8s_yaml "no python3 yaml module (Debian: python3-yaml)"
	skip deploy_k8s_schema "no python3 yaml module"
else
	if out=$(python3 - $manifests 2>&1 <<'PY'
import sys, yaml
for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    assert docs, path + ": no documents"
    for d in docs:
        kind = d.get("kind")
        spec = d.get("spec", {})
        pod = spec.get("template", {}).get("spec") if kind == "DaemonSet" else spec if kind == "Pod" else None
        if pod is None:
            continue
        if kind == "DaemonSet":
            sel = spec["selector"]["matchLabels"]
            labels = spec["template"]["metadata"].get("labels", {})
            assert all(labels.get(k) == v for k, v in sel.items()), path + ": selector does not match the template"
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod.get("initContainers", []) + pod["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in vols, "%s: %s mounts unknown volume %s" % (path, c["name"], m["name"])
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if "VE_SOCKET_DIR" in env:
                mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                v = vols.get(mounts.get(env["VE_SOCKET_DIR"]), {})
                assert "hostPath" in v, "%s: %s: VE_SOCKET_DIR is not a host path" % (path, c["name"])
print("ok")
PY
	); then ok deploy_k8s_yaml; else fail deploy_k8s_yaml "$(echo "$out" | tail -n 3)"; fi
	if [ -n "${KUBECONFORM_SCHEMAS:-}" ] && command -v kubeconform >/dev/null 2>&1; then
		if out=$(kubeconform -strict -summary -schema-location "$KUBECONFORM_SCHEMAS" $manifests 2>&1); then
			ok deploy_k8s_schema
		else
			fail deploy_k8s_schema "$(echo "$out" | tail -n 5)"
		fi
	elif python3 -c 'import jsonschema' 2>/dev/null; then
		if out=$(python3 - "$root/deploy/kubernetes/schema/k8s-subset.json" $manifests 2>&1 <<'PY'
import json, sys, yaml, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema)
bad = 0
for path in sys.argv[2:]:
    for d in yaml.safe_load_all(open(path)):
        if d is None:
            continue
        for e in v.iter_errors(d):
            bad += 1
            print("%s: %s %s: %s" % (path, d.get("kind"), "/".join(map(str, e.absolute_path)), e.message))
# The validator must catch a misspelt key, or it checks nothing.
probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
         "spec": {"containers": [{"name": "c", "image": "i", "volumeMount": []}]}}
assert list(v.iter_errors(probe)), "the schema accepted a misspelt key"
sys.exit(1 if bad else 0)
PY
		); then ok deploy_k8s_schema; else fail deploy_k8s_schema "$(echo "$out" | tail -n 5)"; fi
	else
		skip deploy_k8s_schema "no python3 jsonschema module (Debian: python3-jsonschema) nor kubeconform"
	fi
fi

# ---- deploy_systemd
if ! command -v systemd-analyze >/dev/null 2>&1; then
	skip deploy_systemd "no systemd-analyze"
else
	# The units as make install writes them, pointing at this build.
	mkdir -p "$tmp/units" "$tmp/bin"
	ln -s "$build/ved" "$tmp/bin/ved"
	for u in "$root"/deploy/systemd/*.service; do
		sed -e "s|/usr/local/bin/|$tmp/bin/|g" "$u" >"$tmp/units/$(basename "$u")"
	done
	cp "$tmp/units/ved@.service" "$tmp/units/ved@0.service"
	out=$(cd "$tmp/units" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no \
		"$tmp/units/ved@0.service" "$tmp/units/vitamin-e-mps.service" 2>&1)
	# Dependencies on units of other packages (nvidia-persistenced) are not ours.
	bad=$(echo "$out" | grep -v -e 'nvidia-persistenced' -e '^$' | grep -iE 'error|invalid|unknown|failed' || true)
	if [ -z "$bad" ]; then ok deploy_systemd; else fail deploy_systemd "$(echo "$bad" | head -n 5)"; fi
fi

# ---- deploy_scripts
bad=""
for s in "$root"/deploy/slurm/*.sh "$root"/deploy/bin/ved-per-gpu; do
	bash -n "$s" 2>/dev/null || bad="$bad $(basename "$s")(syntax)"
	[ -x "$s" ] || bad="$bad $(basename "$s")(not executable)"
	if command -v shellcheck >/dev/null 2>&1; then
		shellcheck -S warning "$s" >/dev/null 2>&1 || bad="$bad $(basename "$s")(shellcheck)"
	fi
done
out=$(VE_SOCKET_DIR=/x sh "$root/deploy/slurm/task-prolog.sh")
echo "$out" | grep -q '^export VE_SOCKET_DIR=/x$' || bad="$bad task-prolog-output"
if [ -z "$bad" ]; then ok deploy_scripts; else fail deploy_scripts "$bad"; fi

# ---- deploy_container
bad=""
for src in $(sed -n 's/^COPY \(--from=[a-z]* \)\{0,1\}\([^ ]*\) .*/\1\2/p' "$root/deploy/container/Containerfile" |
	grep -v -- '--from='); do
	[ "$src" = . ] || [ -e "$root/$src" ] || bad="$bad $src"
done
if [ -z "$bad" ]; then ok deploy_container; else fail deploy_container "missing:$bad"; fi
summary
