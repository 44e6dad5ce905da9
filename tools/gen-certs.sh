#!/usr/bin/env bash
# Makes a test certificate authority and the certificates an Ember cluster's mutual TLS
# needs (common/tls.h), with openssl. For tests, local clusters and trying Kubernetes;
# a production cluster's certificates come from its own CA (e.g. cert-manager).
#
#   tools/gen-certs.sh OUTDIR [--san=DNS:ps-0.ember,IP:10.0.0.5] [--days=N] [--ca_name=NAME]
#
# Writes into OUTDIR (created; existing files are replaced):
#   ca.pem ca.key            the CA (keep ca.key off the cluster)
#   server.pem server.key    CN=ember-server: coordinator, PS shards and serving
#                            followers, as servers and as clients of each other
#   client.pem client.key    CN=ember-worker: training workers (data plane only)
#   admin.pem admin.key      CN=ember-admin: operators (emberctl)
# Every certificate is valid for DNS:localhost and IP:127.0.0.1 plus --san. Give the
# servers --admin_identities=ember-admin,ember-server so that operators and the
# servers themselves may make admin calls and workers may not.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
out=""
san_extra=""
days=365
ca_name="Ember test CA"
for arg in "$@"; do
  case "$arg" in
    --help|-h) usage; exit 0 ;;
    --san=*) san_extra="${arg#--san=}" ;;
    --days=*) days="${arg#--days=}" ;;
    --ca_name=*) ca_name="${arg#--ca_name=}" ;;
    --*) echo "gen-certs: unknown flag $arg" >&2; usage >&2; exit 2 ;;
    *) if [ -n "$out" ]; then echo "gen-certs: one OUTDIR only" >&2; exit 2; fi; out="$arg" ;;
  esac
done
if [ -z "$out" ]; then echo "gen-certs: OUTDIR is required" >&2; usage >&2; exit 2; fi
if ! [[ "$days" =~ ^[0-9]+$ ]] || [ "$days" -lt 1 ]; then
  echo "gen-certs: --days must be a whole number >= 1" >&2; exit 2
fi
command -v openssl >/dev/null || { echo "gen-certs: openssl is missing (tools/install-deps.sh)" >&2; exit 1; }

mkdir -p "$out"
umask 077
san="DNS:localhost,IP:127.0.0.1${san_extra:+,$san_extra}"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$out/ca.key" -out "$out/ca.pem" -days "$days" -subj "/CN=$ca_name" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null

issue() {  # NAME COMMON_NAME
  local name="$1" cn="$2"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/$name.key" -out "$out/$name.csr" -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -CAcreateserial -out "$out/$name.pem" -days "$days" -extfile <(printf '%s\n' \
      "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth,clientAuth" \
      "subjectAltName=$san") 2>/dev/null
  rm -f "$out/$name.csr"
}
issue server ember-server
issue client ember-worker
issue admin ember-admin
rm -f "$out/ca.srl"
chmod 644 "$out"/*.pem
echo "gen-certs: wrote $out/{ca,server,client,admin}.{pem,key} (SANs $san, $days days)"
