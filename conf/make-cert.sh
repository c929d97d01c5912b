#!/usr/bin/env bash
# Makes throwaway certificates for the HTTPS example (conf/https.toml), with
# Debian's openssl: a private CA, a server certificate for the given host
# names (and 127.0.0.1, ::1) signed by it, and a client certificate for the
# mTLS entry point. Nothing here is committed: conf/certs/ is git-ignored.
#
#   bash conf/make-cert.sh [OUT_DIR] [HOST ...]   default: conf/certs localhost
#
# Then:  lb run -c conf/https.toml
#        curl --cacert conf/certs/ca.crt https://localhost:8443/
#        curl --cacert conf/certs/ca.crt --cert conf/certs/client.crt --key conf/certs/client.key https://localhost:8444/
set -euo pipefail
out="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/certs}"
[ $# -gt 0 ] && shift
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(localhost)
command -v openssl >/dev/null || { echo "make-cert.sh: needs openssl (apt-get install openssl)" >&2; exit 1; }

mkdir -p "$out"
chmod 700 "$out"
cd "$out"
umask 077
san="IP:127.0.0.1,IP:::1"
for h in "${hosts[@]}"; do san="DNS:$h,$san"; done
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

# the CA: signs the server certificate (clients trust ca.crt) and client certificates (tls.ca = ca.crt)
openssl req -x509 "${ec[@]}" -days 825 -subj "/CN=lb example CA" -keyout ca.key -out ca.crt 2>/dev/null

openssl req "${ec[@]}" -subj "/CN=${hosts[0]}" -keyout lb.key -out lb.csr 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > lb.ext
openssl x509 -req -in lb.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 -extfile lb.ext -out lb.crt 2>/dev/null

openssl req "${ec[@]}" -subj "/CN=lb example client" -keyout client.key -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 -extfile client.ext -out client.crt 2>/dev/null

rm -f lb.csr lb.ext client.csr client.ext ca.srl
chmod 644 ca.crt lb.crt client.crt
echo "make-cert.sh: wrote $out/{ca,lb,client}.{crt,key} for ${hosts[*]} (self-signed CA: clients must trust ca.crt)"
