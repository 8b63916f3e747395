/*
 * Names, class parameters, secret references and the default class: the small rules both
 * snapshot components share. Messages are worded as upstream's, since users grep events for them.
 */
#include "snapshots/snapshots.h"

#include <stdio.h>
#include <string.h>

void snap_content_name(const struct kube_vs *vs, char *buf, size_t len)
{
	char uid[64];

	snprintf(buf, len, SNAP_CONTENT_PREFIX "%s", kube_obj_uid(&vs->meta, uid, sizeof(uid)));
}

int snap_csi_name(const char *prefix, const char *uid, int uuid_len, char *buf, size_t len,
		  char *err, size_t errlen)
{
	char compact[64];
	size_t n = 0;

	if (!uid || !*uid) {
		snprintf(err, errlen, "Corrupted snapshot object, it is missing UID");
		return -1;
	}
	if (uuid_len < 0) {
		snprintf(buf, len, "%s-%s", prefix, uid);
		return 0;
	}
	for (const char *p = uid; *p && n + 1 < sizeof(compact); p++)
		if (*p != '-')
			compact[n++] = *p;
	compact[n] = '\0';
	if ((size_t)uuid_len > n) {
		snprintf(err, errlen, "--snapshot-name-uuid-length %d is longer than the uid %s",
			 uuid_len, uid);
		return -1;
	}
	compact[uuid_len] = '\0';
	snprintf(buf, len, "%s-%s", prefix, compact);
	return 0;
}

static const char *const known_keys[] = {
	"csi.storage.k8s.io/snapshotter-secret-name",
	"csi.storage.k8s.io/snapshotter-secret-namespace",
	"csi.storage.k8s.io/snapshotter-list-secret-name",
	"csi.storage.k8s.io/snapshotter-list-secret-namespace",
	"csi.storage.k8s.io/group-snapshotter-secret-name",
	"csi.storage.k8s.io/group-snapshotter-secret-namespace",
	"csi.storage.k8s.io/group-snapshotter-get-secret-name",
	"csi.storage.k8s.io/group-snapshotter-get-secret-namespace",
};

static bool known_key(const char *k)
{
	for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++)
		if (!strcmp(k, known_keys[i]))
			return true;
	return false;
}

int snap_csi_params(const struct kube_kv *p, size_t n, struct kube_kv *out, char *err,
		    size_t errlen)
{
	int m = 0;

	for (size_t i = 0; i < n; i++) {
		if (strncmp(p[i].key, SNAP_PARAM_PREFIX, strlen(SNAP_PARAM_PREFIX)) != 0) {
			out[m++] = p[i];
			continue;
		}
		if (!known_key(p[i].key)) {
			snprintf(err, errlen,
				 "found unknown parameter key \"%s\" with reserved namespace %s",
				 p[i].key, SNAP_PARAM_PREFIX);
			return -1;
		}
	}
	return m;
}

static const char *param(const struct kube_kv *p, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(p[i].key, key))
			return p[i].value;
	return NULL;
}

/* Expands ${token}s from the allowed ones; -1 with err for an unknown or absent token. */
static int expand(const char *tmpl, const char *const tokens[][2], size_t ntokens, char *out,
		  size_t outlen, char *err, size_t errlen)
{
	size_t o = 0;

	for (const char *s = tmpl; *s;) {
		if (s[0] != '$' || s[1] != '{') {
			if (o + 1 < outlen)
				out[o++] = *s;
			s++;
			continue;
		}
		const char *end = strchr(s, '}');
		size_t klen = end ? (size_t)(end - s - 2) : 0;
		const char *val = NULL;
		for (size_t i = 0; end && i < ntokens; i++)
			if (tokens[i][1] && strlen(tokens[i][0]) == klen &&
			    !strncmp(tokens[i][0], s + 2, klen))
				val = tokens[i][1];
		if (!val) {
			snprintf(err, errlen, "error resolving value \"%s\": invalid tokens: [\"%.*s\"]",
				 tmpl, end ? (int)klen : (int)strlen(s + 2), s + 2);
			return -1;
		}
		for (; *val && o + 1 < outlen; val++)
			out[o++] = *val;
		s = end + 1;
	}
	out[o] = '\0';
	return 0;
}

/* DNS-1123 label (namespace) or subdomain (secret name). */
static bool dns1123(const char *s, bool subdomain)
{
	size_t n = strlen(s);

	if (n == 0 || n > (subdomain ? 253u : 63u))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && c != '-' && !(subdomain && c == '.'))
			return false;
		if (!alnum && (i == 0 || i == n - 1))
			return false;
	}
	return true;
}

int snap_secret_ref(enum snap_secret_kind kind, const struct kube_kv *p, size_t n,
		    const char *content, const char *vs_name, const char *vs_ns, char *name,
		    size_t namelen, char *ns, size_t nslen, char *err, size_t errlen)
{
	/* the key pair and the token words of each kind: upstream's secretParamsMap */
	static const char *const words[][4] = {
		[SNAP_SECRET_CREATE] = { "Snapshotter", "volumesnapshotcontent.name",
					 "volumesnapshot.namespace", "volumesnapshot.name" },
		[SNAP_SECRET_LIST] = { "SnapshotterList", "volumesnapshotcontent.name",
				       "volumesnapshot.namespace", "volumesnapshot.name" },
		[SNAP_SECRET_GROUP] = { "GroupSnapshotter", "volumegroupsnapshotcontent.name",
					"volumegroupsnapshot.namespace", "volumegroupsnapshot.name" },
		[SNAP_SECRET_GROUP_GET] = { "GroupSnapshotterGet", "volumegroupsnapshotcontent.name",
					    "volumegroupsnapshot.namespace",
					    "volumegroupsnapshot.name" },
	};
	const char *nt = param(p, n, known_keys[2 * kind]);
	const char *st = param(p, n, known_keys[2 * kind + 1]);

	if (!nt && !st)
		return 0;
	if (!nt || !st) {
		snprintf(err, errlen, "failed to get name and namespace template from params: either "
			 "name and namespace for %s secrets specified, Both must be specified",
			 words[kind][0]);
		return -1;
	}
	const char *const ns_tokens[][2] = { { words[kind][1], content },
					     { words[kind][2], vs_ns } };
	const char *const name_tokens[][2] = { { words[kind][1], content },
					       { words[kind][2], vs_ns },
					       { words[kind][3], vs_name } };
	if (expand(st, ns_tokens, 2, ns, nslen, err, errlen))
		return -1;
	if (!dns1123(ns, false)) {
		snprintf(err, errlen, "\"%s\" is not a valid namespace name", ns);
		return -1;
	}
	if (expand(nt, name_tokens, 3, name, namelen, err, errlen))
		return -1;
	if (!dns1123(name, true)) {
		snprintf(err, errlen, "\"%s\" is not a valid secret name", name);
		return -1;
	}
	return 1;
}

/* The default class of driver among classes; `what` words the errors ("snapshot class"). */
static const struct kube_vsclass *default_class(const struct kube_vsclass *const *classes, size_t n,
						const char *driver, const char *what, char *err,
						size_t errlen)
{
	const struct kube_vsclass *found = NULL;
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		if (classes[i]->is_default && driver && classes[i]->driver &&
		    !strcmp(classes[i]->driver, driver)) {
			found = classes[i];
			count++;
		}
	if (count == 1)
		return found;
	if (count == 0)
		snprintf(err, errlen, "cannot find default %s", what);
	else
		snprintf(err, errlen, "%zu default %ses were found", count, what);
	return NULL;
}

const struct kube_vsclass *snap_default_class(const struct kube_vsclass *const *classes, size_t n,
					      const char *driver, char *err, size_t errlen)
{
	return default_class(classes, n, driver, "snapshot class", err, errlen);
}

const struct kube_vsclass *snap_default_group_class(const struct kube_vsclass *const *classes,
						    size_t n, const char *driver, char *err,
						    size_t errlen)
{
	return default_class(classes, n, driver, "group snapshot class", err, errlen);
}

bool snap_ref_is(const struct kube_vsc *c, const struct kube_vs *vs)
{
	char uid[64];

	return c && vs && c->ref_name && !strcmp(c->ref_name, vs->meta.name) && c->ref_ns &&
	       vs->meta.ns && !strcmp(c->ref_ns, vs->meta.ns) &&
	       !strcmp(c->ref_uid, kube_obj_uid(&vs->meta, uid, sizeof(uid)));
}

bool snap_csi_final(int code)
{
	/* Canceled, DeadlineExceeded, ResourceExhausted, Aborted, Unavailable: may still run. */
	return code != 1 && code != 4 && code != 8 && code != 10 && code != 14;
}

const struct feature_gate snap_feature_gates[] = {
	{ SNAP_GATE_GROUPS, true, FG_GA, false }, /* v8.7: GA, on by default, may be set false */
	{ "ReleaseLeaderElectionOnExit", false, FG_ALPHA, false },
};
const size_t snap_feature_gates_len = sizeof(snap_feature_gates) / sizeof(snap_feature_gates[0]);
