#!/bin/bash
# kube-emulator over HTTPS with a bearer token: the kubeconfig carries the CA, curl and kubectl
# verify the certificate, the token is required, plain HTTP to the TLS port gets nothing.
. "$(dirname "$0")/lib_emulator.sh"
command -v openssl >/dev/null || { echo "openssl not installed: install Debian's openssl"; exit 1; }
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kube-emulator" \
	-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || { echo "openssl failed"; exit 1; }
emu_start --tls-cert "$T/cert.pem" --tls-key "$T/key.pem" --token tls-token

check "kubeconfig uses https" bash -c "[[ '$S' == https://127.0.0.1:* ]]"
grep 'certificate-authority-data' "$KC" | awk '{print $2}' | base64 -d >"$T/ca-from-kubeconfig.pem"
check "kubeconfig carries the certificate as CA" cmp -s "$T/ca-from-kubeconfig.pem" "$T/cert.pem"

CURL_EXTRA=(--cacert "$T/cert.pem")
req GET /api/v1/namespaces
expect_code 401 "HTTPS without a token"
CURL_EXTRA=(--cacert "$T/cert.pem" -H "Authorization: Bearer tls-token")
req GET /api/v1/namespaces
expect_code 200 "HTTPS with the token"
req POST /api/v1/persistentvolumes '{"metadata":{"name":"pv-tls"},"spec":{}}'
expect_code 201 "create over HTTPS"
CODE=$(curl -s -o /dev/null -w '%{http_code}' "$S/version")
check "an unverified client is refused by curl" test "$CODE" = "000"
HTTP_URL=${S/https:/http:}
CODE=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$HTTP_URL/version")
check "plain HTTP to the TLS port gets no API answer" test "$CODE" != "200"

K=("${KUBECTL:-kubectl}" --kubeconfig "$KC" --request-timeout=20s)
check "kubectl over HTTPS with the token" eq "$("${K[@]}" get pv pv-tls -o jsonpath='{.metadata.name}')" "pv-tls"
check "kubectl with a wrong token is refused" bash -c "! ${K[*]} --token nope get pv 2>'$T/err'"
check "refusal says Unauthorized" grep -qiE "unauthorized|provide credentials" "$T/err"

# a watch over TLS streams events
curl -sN --cacert "$T/cert.pem" -H "Authorization: Bearer tls-token" \
	"$S/api/v1/persistentvolumes?watch=1&resourceVersion=0&timeoutSeconds=2" >"$T/watch"
check "watch over HTTPS" eq "$(jq -r '"\(.type) \(.object.metadata.name)"' "$T/watch")" "ADDED pv-tls"

emu_stop
check "TLS server stops cleanly" eq "$?" "0"
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --tls-cert "$T/cert.pem" >"$T/bad.log" 2>&1; then
	fail "--tls-cert without --tls-key must stop the start"
fi
check "missing key is reported" grep -q "tls-key" "$T/bad.log"
echo garbage >"$T/bad.pem"
if timeout 10 "$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --tls-cert "$T/bad.pem" --tls-key "$T/bad.pem" >"$T/bad.log" 2>&1; then
	fail "a bad certificate must stop the start"
fi
check "bad certificate is reported" grep -qi "certificate" "$T/bad.log"

finish
