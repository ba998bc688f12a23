#!/usr/bin/env bash
# Runs the demo against a kind cluster instead of the embedded control plane: the daemon and a
# Git server run on this machine, the kind apiserver calls the daemon's webhook over the docker
# network. Needs kind and docker. Usage: scripts/kind-demo.sh [cluster-name]
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:-gitops-reverser-demo}"
command -v kind >/dev/null || { echo "kind is not installed: https://kind.sigs.k8s.io" >&2; exit 1; }
if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --name "$name"
fi
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
kind get kubeconfig --name "$name" > "$kubeconfig"
# The apiserver runs in a container on the "kind" docker network; this machine is its gateway.
gateway="$(docker network inspect kind --format '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | tr ' ' '\n' | grep -m1 '\.')"
echo "kind cluster $name; the apiserver will call the webhook at https://$gateway"
exec go run ./scripts/demo -kubeconfig "$kubeconfig" -webhook-host "$gateway"
