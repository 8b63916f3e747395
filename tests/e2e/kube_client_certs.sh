#!/bin/bash
# e2e: client certificates against the real kube-apiserver (scripts/realcp.sh, v1.37.2). One
# control plane; openssl makes a certificate for each key type, signed by the cluster's CA:
# RSA 2048 and 4096 (kubeadm's kind), EC P-256 and P-384. Each key is written in its traditional
# form (PKCS#1 "RSA PRIVATE KEY", SEC1 "EC PRIVATE KEY") and as PKCS#8 ("PRIVATE KEY"), and each
# pair goes into a kubeconfig as client-certificate/client-key files and as the -data forms, and
# into one whose user is an exec credential plugin (ExecCredential status.clientCertificateData
# and clientKeyData). For every kubeconfig kcsi's client (build/tests/kube-whoami: kube/config,
# kube/client, GnuTLS, as every component) and kubectl must be taken for the certificate's user,
# as a SelfSubjectReview says (kubectl auth whoami), not for system:anonymous.
# Before the fix (GnuTLS's certificate choice under TLS 1.3, src/kube/http_dial.c) kcsi sent no
# RSA certificate: every RSA case fails, the EC ones pass.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}" "${KCSI_TESTS:?}"
. "$(dirname "$0")/lib_proc.sh" kube-client-certs
. "$(dirname "$0")/lib_realcp.sh"
realcp_missing_peers && exit 1
WHOAMI=$KCSI_TESTS/kube-whoami
[ -x "$WHOAMI" ] || { echo "FAIL: $WHOAMI is not built"; exit 1; }
t0=$SECONDS

realcp_start --no-controllers

# ---- keys and certificates: KIND -> $T/KIND.crt, $T/KIND.trad.key, $T/KIND.pkcs8.key ----
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$T/client.ext"
make_cert() { # kind
	local k=$1
	case $k in
	rsa2048 | rsa4096)
		openssl genrsa -traditional -out "$T/$k.trad.key" "${k#rsa}" 2>/dev/null ;;
	ec256) openssl ecparam -name prime256v1 -genkey -noout -out "$T/$k.trad.key" ;;
	ec384) openssl ecparam -name secp384r1 -genkey -noout -out "$T/$k.trad.key" ;;
	esac
	openssl pkcs8 -topk8 -nocrypt -in "$T/$k.trad.key" -out "$T/$k.pkcs8.key" &&
		openssl req -new -key "$T/$k.trad.key" -subj "/O=kcsi-certs/CN=kcsi-$k" -out "$T/$k.csr" &&
		openssl x509 -req -in "$T/$k.csr" -CA "$RCP/ca.crt" -CAkey "$RCP/ca.key" \
			-set_serial "0x$(openssl rand -hex 16)" -days 1 -extfile "$T/client.ext" \
			-out "$T/$k.crt" 2>/dev/null || { fail "openssl for $k"; exit 1; }
}
for k in rsa2048 rsa4096 ec256 ec384; do make_cert $k; done
head -1 "$T/rsa2048.trad.key" | grep -q "BEGIN RSA PRIVATE KEY" || fail "rsa2048: not a PKCS#1 key"
head -1 "$T/ec256.trad.key" | grep -q "BEGIN EC PRIVATE KEY" || fail "ec256: not a SEC1 key"
head -1 "$T/ec256.pkcs8.key" | grep -q "BEGIN PRIVATE KEY" || fail "ec256: not a PKCS#8 key"

# ---- kubeconfigs: NAME -> $T/kc.NAME ----
kubeconfig() { # name, then the lines of the user (indented 4)
	local name=$1; shift
	{
		printf 'apiVersion: v1\nkind: Config\ncurrent-context: c\n'
		printf 'clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: %s\n' "$RS" "$RCP/ca.crt"
		printf 'contexts:\n- name: c\n  context: {cluster: c, user: u}\n'
		printf 'users:\n- name: u\n  user:\n'
		printf '    %s\n' "$@"
	} >"$T/kc.$name"
}
# The plugin prints the ExecCredential written here (python3: the PEM as JSON strings).
exec_credential() { # kind form
	python3 - "$T/$1.crt" "$T/$1.$2.key" >"$T/exec.$1.$2.json" <<'PY'
import json, sys
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": open(sys.argv[1]).read(),
                             "clientKeyData": open(sys.argv[2]).read()}}))
PY
}
cases=()
for k in rsa2048 rsa4096 ec256 ec384; do
	for f in trad pkcs8; do
		kubeconfig "$k-$f-files" "client-certificate: $T/$k.crt" "client-key: $T/$k.$f.key"
		kubeconfig "$k-$f-data" "client-certificate-data: $(base64 -w0 "$T/$k.crt")" \
			"client-key-data: $(base64 -w0 "$T/$k.$f.key")"
		exec_credential $k $f
		kubeconfig "$k-$f-exec" "exec:" "  apiVersion: client.authentication.k8s.io/v1" \
			"  command: /bin/cat" "  args: [$T/exec.$k.$f.json]" "  interactiveMode: Never"
		cases+=("$k-$f-files" "$k-$f-data" "$k-$f-exec")
	done
done

# ---- who each client is taken for ----
kcsi_bad=() kubectl_bad=()
for c in "${cases[@]}"; do
	want=kcsi-${c%%-*}
	got=$("$WHOAMI" --kubeconfig "$T/kc.$c" 2>"$T/whoami.$c.err" | sed -n 's/^USER //p')
	[ "$got" = "$want" ] || {
		fail "kcsi with $c: not taken for $want: ${got:+taken for $got }$(head -c 300 "$T/whoami.$c.err")"
		kcsi_bad+=("$c")
	}
	got=$(kubectl --kubeconfig "$T/kc.$c" --request-timeout=20s auth whoami \
		-o jsonpath='{.status.userInfo.username}' 2>"$T/kubectl.$c.err")
	[ "$got" = "$want" ] || {
		fail "kubectl with $c: not taken for $want: ${got:+taken for $got }$(head -c 300 "$T/kubectl.$c.err")"
		kubectl_bad+=("$c")
	}
done
# The group comes with the certificate too (O=kcsi-certs), as the authenticator reads it.
"$WHOAMI" --kubeconfig "$T/kc.rsa2048-trad-files" 2>/dev/null | grep -q '^GROUPS .*kcsi-certs' ||
	fail "kcsi with rsa2048-trad-files: the group kcsi-certs is missing"

realcp_stop
if [ $FAILS != 0 ]; then
	echo "kcsi refused with: ${kcsi_bad[*]:-none}; kubectl refused with: ${kubectl_bad[*]:-none}"
	exit 1
fi
echo "PASS (${#cases[@]} kubeconfigs, each with kcsi and kubectl, in $((SECONDS - t0)) s)"
