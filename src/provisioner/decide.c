/*
 * Provisioner decisions without I/O: feature gates, which claims, the volume name, StorageClass
 * parameters, secret references and their templates, access modes and CSI error classes. The
 * rules are upstream external-provisioner v6.4's; see prov.h for each contract.
 */
#include "provisioner/prov.h"

#include "base/featuregate.h"
#include "base/flags.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* external-provisioner v6.3's own gates; HonorPVReclaimPolicy was removed in v6.2 (its finalizer is
 * always added now), so naming it is an error, as upstream. */
const struct feature_gate prov_feature_gates[] = {
	{ "Topology", true, FG_GA, false },
	{ "CrossNamespaceVolumeDataSource", false, FG_ALPHA, false },
	{ "VolumeAttributesClass", true, FG_GA, false },
	{ "ReleaseLeaderElectionOnExit", false, FG_ALPHA, false },
};
const size_t prov_feature_gates_len = sizeof(prov_feature_gates) / sizeof(prov_feature_gates[0]);

int prov_parse_gates(const struct flag_map *m, struct prov_gates *g, char *err, size_t errlen)
{
	const struct feature_gate *t = prov_feature_gates;
	size_t n = prov_feature_gates_len;

	memset(g, 0, sizeof(*g));
	if (feature_gates_check(m, t, n, err, errlen))
		return -1;
	g->topology = feature_gate_enabled(m, t, n, "Topology");
	g->cross_namespace_source = feature_gate_enabled(m, t, n, "CrossNamespaceVolumeDataSource");
	g->vac = feature_gate_enabled(m, t, n, "VolumeAttributesClass");
	g->vac_explicit = flag_map_get(m, "VolumeAttributesClass") != NULL;
	g->honor_pv_reclaim_policy = true;
	return 0;
}

enum prov_claim_decision prov_should_provision(const struct kube_pvc *pvc, const char *driver,
					       const struct kube_storageclass *sc)
{
	if (pvc->volume_name && *pvc->volume_name)
		return PROV_IGNORE;
	if (!pvc->provisioner || strcmp(pvc->provisioner, driver) != 0)
		return PROV_IGNORE;
	if (!sc)
		return PROV_NO_CLASS;
	if (sc->wait_for_first_consumer && (!pvc->selected_node || !*pvc->selected_node))
		return PROV_WAIT_FOR_NODE;
	return PROV_PROVISION;
}

int prov_volume_name(const char *prefix, const char *uid, int uuid_len, char *out, size_t outlen,
		     char *err, size_t errlen)
{
	char compact[128];
	size_t n = 0;

	if (!prefix || !*prefix)
		return fail(err, errlen, "Volume name prefix cannot be of length 0");
	if (!uid || !*uid)
		return fail(err, errlen, "corrupted PVC object, it is missing UID");
	if (uuid_len < 0) {
		if ((size_t)snprintf(out, outlen, "%s-%s", prefix, uid) >= outlen)
			return fail(err, errlen, "volume name \"%s-%s\" is too long", prefix, uid);
		return 0;
	}
	for (const char *p = uid; *p && n + 1 < sizeof(compact); p++)
		if (*p != '-')
			compact[n++] = *p;
	compact[n] = 0;
	if ((size_t)uuid_len > n)
		return fail(err, errlen, "--volume-name-uuid-length %d is longer than the UID \"%s\"",
			    uuid_len, uid);
	compact[uuid_len] = 0;
	if ((size_t)snprintf(out, outlen, "%s-%s", prefix, compact) >= outlen)
		return fail(err, errlen, "volume name \"%s-%s\" is too long", prefix, compact);
	return 0;
}

int prov_fstype(const struct kube_kv *params, size_t n, const char *def, const char **out,
		char *err, size_t errlen)
{
	int found = 0;

	*out = "";
	for (size_t i = 0; i < n; i++) {
		if (!strcasecmp(params[i].key, "fstype") || !strcmp(params[i].key, PROV_PARAM_FSTYPE)) {
			*out = params[i].value ? params[i].value : "";
			found++;
		}
	}
	if (found > 1)
		return fail(err, errlen, "fstype specified in parameters with both \"fstype\" and \"%s\" keys",
			    PROV_PARAM_FSTYPE);
	if (!**out && def)
		*out = def;
	return 0;
}

/* The csi.storage.k8s.io/ keys the provisioner knows (and strips). */
static const char *const known_prefixed[] = {
	"fstype", "secret-name", "secret-namespace",
	"provisioner-secret-name", "provisioner-secret-namespace",
	"controller-publish-secret-name", "controller-publish-secret-namespace",
	"node-stage-secret-name", "node-stage-secret-namespace",
	"node-publish-secret-name", "node-publish-secret-namespace",
	"controller-expand-secret-name", "controller-expand-secret-namespace",
	"node-expand-secret-name", "node-expand-secret-namespace",
	"controller-modify-secret-name", "controller-modify-secret-namespace",
};

int prov_strip_params(const struct kube_kv *params, size_t n, struct kube_kv *out, char *err,
		      size_t errlen)
{
	size_t plen = strlen(PROV_PARAM_PREFIX);
	int m = 0;

	for (size_t i = 0; i < n; i++) {
		const char *k = params[i].key;
		if (strncmp(k, PROV_PARAM_PREFIX, plen) != 0) {
			out[m++] = params[i];
			continue;
		}
		bool known = false;
		for (size_t j = 0; j < sizeof(known_prefixed) / sizeof(known_prefixed[0]); j++)
			if (!strcmp(k + plen, known_prefixed[j]))
				known = true;
		if (!known)
			return fail(err, errlen, "found unknown parameter key \"%s\" with reserved namespace %s",
				    k, PROV_PARAM_PREFIX);
	}
	return m;
}

/* ---- secrets ---- */

struct secret_keys {
	const char *what;                   /* "Provisioner", for messages */
	const char *name, *ns;              /* csi.storage.k8s.io/... */
	const char *old_name, *old_ns;      /* deprecated csiXxx keys; NULL if none */
};

static const struct secret_keys secret_keys[PROV_SECRET_KINDS] = {
	[PROV_SECRET_PROVISIONER] = { "Provisioner", PROV_PARAM_PREFIX "provisioner-secret-name",
		PROV_PARAM_PREFIX "provisioner-secret-namespace",
		"csiProvisionerSecretName", "csiProvisionerSecretNamespace" },
	[PROV_SECRET_CONTROLLER_PUBLISH] = { "ControllerPublish",
		PROV_PARAM_PREFIX "controller-publish-secret-name",
		PROV_PARAM_PREFIX "controller-publish-secret-namespace",
		"csiControllerPublishSecretName", "csiControllerPublishSecretNamespace" },
	[PROV_SECRET_NODE_STAGE] = { "NodeStage", PROV_PARAM_PREFIX "node-stage-secret-name",
		PROV_PARAM_PREFIX "node-stage-secret-namespace",
		"csiNodeStageSecretName", "csiNodeStageSecretNamespace" },
	[PROV_SECRET_NODE_PUBLISH] = { "NodePublish", PROV_PARAM_PREFIX "node-publish-secret-name",
		PROV_PARAM_PREFIX "node-publish-secret-namespace",
		"csiNodePublishSecretName", "csiNodePublishSecretNamespace" },
	[PROV_SECRET_CONTROLLER_EXPAND] = { "ControllerExpand",
		PROV_PARAM_PREFIX "controller-expand-secret-name",
		PROV_PARAM_PREFIX "controller-expand-secret-namespace", NULL, NULL },
	[PROV_SECRET_NODE_EXPAND] = { "NodeExpand", PROV_PARAM_PREFIX "node-expand-secret-name",
		PROV_PARAM_PREFIX "node-expand-secret-namespace", NULL, NULL },
	[PROV_SECRET_CONTROLLER_MODIFY] = { "ControllerModify",
		PROV_PARAM_PREFIX "controller-modify-secret-name",
		PROV_PARAM_PREFIX "controller-modify-secret-namespace", NULL, NULL },
};
static const struct secret_keys default_secret_keys = {
	"Default", PROV_PARAM_PREFIX "secret-name", PROV_PARAM_PREFIX "secret-namespace", NULL, NULL
};

static const char *param(const struct kube_kv *p, size_t n, const char *key, bool *found)
{
	*found = false;
	if (!key)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(p[i].key, key)) {
			*found = true;
			return p[i].value ? p[i].value : "";
		}
	return NULL;
}

/* verifyAndGetSecretNameAndNamespaceTemplate */
static int templates(const struct secret_keys *k, const struct kube_kv *p, size_t n,
		     const char **name, const char **ns, char *err, size_t errlen)
{
	int nn = 0, nns = 0;
	bool f;
	const char *v;

	*name = *ns = NULL;
	if ((v = param(p, n, k->old_name, &f)), f) {
		*name = v;
		nn++;
	}
	if ((v = param(p, n, k->old_ns, &f)), f) {
		*ns = v;
		nns++;
	}
	if ((v = param(p, n, k->name, &f)), f) {
		*name = v;
		nn++;
	}
	if ((v = param(p, n, k->ns, &f)), f) {
		*ns = v;
		nns++;
	}
	if (nn > 1 || nns > 1)
		return fail(err, errlen, "%s secrets specified in parameters with both \"csi\" and \"%s\" keys",
			    k->what, PROV_PARAM_PREFIX);
	if (nn != nns)
		return fail(err, errlen, "either name and namespace for %s secrets specified, Both must be specified",
			    k->what);
	if (nn == 1 && (!**name || !**ns))
		return fail(err, errlen, "%s secrets specified in parameters but value of either namespace or name is empty",
			    k->what);
	return 0;
}

int prov_expand(const char *t, const struct kube_kv *vars, size_t nvars, char *out, size_t outlen,
		char *err, size_t errlen)
{
	struct strbuf sb = STRBUF_INIT, missing = STRBUF_INIT;
	int rc = 0;

	for (size_t i = 0; t[i];) {
		if (t[i] != '$' || !t[i + 1]) {
			strbuf_addch(&sb, t[i++]);
			continue;
		}
		char name[512];
		size_t len = 0;
		if (t[i + 1] == '{') {
			const char *end = strchr(t + i + 2, '}');
			if (!end) { /* os.Expand drops a bad syntax "${" */
				i += 2;
				continue;
			}
			len = (size_t)(end - (t + i + 2));
			snprintf(name, sizeof(name), "%.*s", (int)len, t + i + 2);
			i += len + 3;
		} else {
			size_t j = i + 1;
			while (isalnum((unsigned char)t[j]) || t[j] == '_')
				j++;
			if (j == i + 1) {
				strbuf_addch(&sb, t[i++]);
				continue;
			}
			len = j - i - 1;
			snprintf(name, sizeof(name), "%.*s", (int)len, t + i + 1);
			i = j;
		}
		const char *val = NULL;
		for (size_t k = 0; k < nvars; k++)
			if (!strcmp(vars[k].key, name))
				val = vars[k].value;
		if (val) {
			strbuf_addstr(&sb, val);
		} else {
			strbuf_addf(&missing, "%s\"%s\"", missing.len ? " " : "", name);
			rc = -1;
		}
	}
	if (rc)
		fail(err, errlen, "invalid tokens: [%s]", missing.buf);
	else if (sb.len >= outlen)
		rc = fail(err, errlen, "resolved value is too long");
	else
		memcpy(out, sb.buf, sb.len + 1);
	strbuf_release(&sb);
	strbuf_release(&missing);
	return rc;
}

static bool dns1123_label(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

static bool dns1123_subdomain(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return false;
	for (const char *p = s;;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || !isalnum((unsigned char)p[0]) || !isalnum((unsigned char)p[l - 1]))
			return false;
		for (size_t i = 0; i < l; i++)
			if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || p[i] == '-'))
				return false;
		if (!dot)
			return true;
		p = dot + 1;
	}
}

int prov_secret_ref(enum prov_secret_kind kind, const struct kube_kv *params, size_t n,
		    const struct prov_template_ctx *ctx, struct prov_secret_ref *ref, char *err,
		    size_t errlen)
{
	const char *nt, *nst;
	char e2[256];

	memset(ref, 0, sizeof(*ref));
	if (templates(&secret_keys[kind], params, n, &nt, &nst, e2, sizeof(e2)))
		return fail(err, errlen, "failed to get name and namespace template from params: %s", e2);
	if (!nt && !nst && templates(&default_secret_keys, params, n, &nt, &nst, e2, sizeof(e2)))
		return fail(err, errlen, "failed to get default name and namespace template from params: %s", e2);
	if (!nt && !nst)
		return 0;

	/* The namespace may use the PV name and the claim's namespace (not the user's choice). */
	struct kube_kv vars[64];
	size_t nv = 0;
	vars[nv++] = (struct kube_kv){ "pv.name", ctx->pv_name };
	if (ctx->pvc_ns)
		vars[nv++] = (struct kube_kv){ "pvc.namespace", ctx->pvc_ns };
	if (prov_expand(nst, vars, nv, ref->ns, sizeof(ref->ns), e2, sizeof(e2)))
		return fail(err, errlen, "error resolving value \"%s\": %s", nst, e2);
	if (!dns1123_label(ref->ns)) {
		if (strcmp(nst, ref->ns) != 0)
			return fail(err, errlen, "\"%s\" resolved to \"%s\" which is not a valid namespace name",
				    nst, ref->ns);
		return fail(err, errlen, "\"%s\" is not a valid namespace name", nst);
	}
	/* The name may also use the claim's name and annotations. */
	char keys[48][300];
	if (ctx->pvc_name)
		vars[nv++] = (struct kube_kv){ "pvc.name", ctx->pvc_name };
	for (size_t i = 0; i < ctx->nannotations && i < 48; i++) {
		snprintf(keys[i], sizeof(keys[i]), "pvc.annotations['%s']", ctx->annotations[i].key);
		vars[nv++] = (struct kube_kv){ keys[i], ctx->annotations[i].value };
	}
	if (prov_expand(nt, vars, nv, ref->name, sizeof(ref->name), e2, sizeof(e2)))
		return fail(err, errlen, "error resolving value \"%s\": %s", nt, e2);
	if (!dns1123_subdomain(ref->name)) {
		if (strcmp(nt, ref->name) != 0)
			return fail(err, errlen, "\"%s\" resolved to \"%s\" which is not a valid secret name",
				    nt, ref->name);
		return fail(err, errlen, "\"%s\" is not a valid secret name", nt);
	}
	ref->set = true;
	return 0;
}

bool prov_params_use_annotations(const struct kube_kv *params, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (params[i].value && strstr(params[i].value, "pvc.annotations["))
			return true;
	return false;
}

enum prov_state prov_check_error(int code, bool may_reschedule)
{
	switch (code) {
	case 8: /* RESOURCE_EXHAUSTED: not pending; may succeed elsewhere */
		return may_reschedule ? PROV_RESCHEDULE : PROV_FINISHED;
	case 1:  /* CANCELLED */
	case 4:  /* DEADLINE_EXCEEDED */
	case 14: /* UNAVAILABLE */
	case 10: /* ABORTED: operation pending */
		return PROV_IN_BACKGROUND;
	}
	/* Every other error: provisioning did not start or failed; it is not in progress. Only
	 * RESOURCE_EXHAUSTED says another node may do better: the selected node is kept. */
	return PROV_FINISHED;
}

/* ---- distributed provisioning ---- */

int64_t prov_owner_delay(int64_t base_ns, int64_t max_ns, unsigned attempts, double rnd,
			 unsigned rank, unsigned n)
{
	int64_t d = base_ns > 0 ? base_ns : 0;
	for (unsigned i = 0; i < attempts && d < max_ns; i++)
		d = d > INT64_MAX / 2 ? INT64_MAX : d * 2;
	if (max_ns > 0 && d > max_ns)
		d = max_ns;
	if (rnd < 0 || rnd >= 1)
		rnd = 0;
	if (attempts == 0 && n > 1) {
		if (rank >= n)
			rank = n - 1;
		/* rank r: a random time in [r * d/2, (r + 1) * d/2), at most the max delay */
		double at = ((double)rank + rnd) / 2.0 * (double)d;
		if (rank == 0)
			return 0;
		return max_ns > 0 && at > (double)max_ns ? max_ns : (int64_t)at;
	}
	return (int64_t)((double)d * rnd);
}

uint64_t prov_owner_score(const char *claim_uid, const char *node)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over "uid\0node" ... */
	for (const char *p = claim_uid; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h *= 0x100000001b3ULL;
	for (const char *p = node; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h ^= h >> 30; /* ... then a 64-bit finalizer, so that near names score far apart */
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

bool prov_pv_on_node(const struct kube_pv *pv, const struct kube_kv *topology, size_t n)
{
	if (!pv || !pv->nnode_affinity)
		return false;
	return kube_node_selector_match(pv->node_affinity, pv->nnode_affinity, topology,
					(uint16_t)(n > UINT16_MAX ? UINT16_MAX : n));
}

/* ---- the snapshot source-protection sweep ---- */

bool prov_snapshot_restore_pending(const struct kube_pvc *pvc, char *key, size_t keylen)
{
	if (!pvc || pvc->phase != KUBE_PVC_PENDING || !prov_streq(pvc->data_source_kind, "VolumeSnapshot"))
		return false;
	if (pvc->data_source_group && *pvc->data_source_group &&
	    strcmp(pvc->data_source_group, PROV_SNAPSHOT_GROUP) != 0)
		return false;
	if (!pvc->data_source_name || !*pvc->data_source_name)
		return false;
	snprintf(key, keylen, "%s/%s", pvc->meta.ns ? pvc->meta.ns : "", pvc->data_source_name);
	return true;
}
