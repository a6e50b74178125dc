#!/usr/bin/env bash
# Creates the netpulse-gateway-tls Secret (tls.crt, tls.key, ca.crt) that the gateway serves
# OTLP with and whose ca.crt the agents verify it against, from a new self-signed CA, for
# clusters without cert-manager (docs/security.md has the cert-manager Certificate).
#   hack/gateway-tls-secret.sh [namespace] [shards]   (default netpulse, 1; needs openssl and kubectl)
# With shards > 1 (the chart's gateway.shards) the certificate also covers every shard's
# Service, netpulse-gateway-<i>.
# Renew by running it again before the year is over and restarting the gateway pods
# (the gateway also re-reads its certificate hourly).
set -euo pipefail
ns=${1:-netpulse}
shards=${2:-1}
san="DNS:netpulse-gateway.$ns.svc,DNS:netpulse-gateway.$ns.svc.cluster.local"
if [ "$shards" -gt 1 ]; then
  for ((i = 0; i < shards; i++)); do
    san="$san,DNS:netpulse-gateway-$i.$ns.svc,DNS:netpulse-gateway-$i.$ns.svc.cluster.local"
  done
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -subj "/CN=netpulse-gateway-ca" -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=netpulse-gateway.$ns.svc" -keyout tls.key -out tls.csr 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >ext.cnf
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile ext.cnf -out tls.crt 2>/dev/null
kubectl -n "$ns" create secret generic netpulse-gateway-tls --type=kubernetes.io/tls \
  --from-file=tls.crt --from-file=tls.key --from-file=ca.crt --dry-run=client -o yaml | kubectl apply -f -
echo "Secret $ns/netpulse-gateway-tls created (CA valid 365 days)"
