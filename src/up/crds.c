/*
 * The snapshot CRDs of `kcsi up --install-snapshot-crds`. The manifests go to the API server as
 * YAML (Content-Type application/yaml, which kube-apiserver decodes as it does JSON), so kcsi
 * carries them byte for byte as deploy/ has them and needs no YAML parser. "Installed" means
 * Established: until then the API server answers 404 for the new kinds and snapshot-controller
 * would start waiting for them.
 */
#include "up/crds.h"

#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/timeutil.h"

static const struct kube_resource CRDS = { "apiextensions.k8s.io", "v1",
					   "customresourcedefinitions", false };

/* "True" when the CRD has the condition type=status; reads the object the API server returned. */
static bool has_condition(json_t *crd, const char *type, const char *status)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(crd, "status"), "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));
		if (t && s && !strcmp(t, type) && !strcmp(s, status))
			return true;
	}
	return false;
}

static int create_one(struct kube_client *kc, const struct up_crd_manifest *m, bool *created)
{
	struct kube_err e = { 0 };
	*created = false;
	json_t *old = kube_get(kc, &CRDS, NULL, m->name, &e);
	if (old) {
		json_decref(old);
		printf("kcsi up: CRD %s is there already: left as it is\n", m->name);
		return 0;
	}
	if (!kube_err_is_not_found(&e)) {
		fprintf(stderr, "kcsi up: reading CRD %s: %s\n", m->name, e.message);
		return -1;
	}
	struct strbuf path = STRBUF_INIT, out = STRBUF_INIT;
	kube_path(&path, &CRDS, NULL, NULL, NULL);
	struct kube_request rq = { .method = "POST", .path = path.buf,
				   .content_type = "application/yaml", .body = m->yaml,
				   .body_len = strlen(m->yaml) };
	int rc = kube_do(kc, &rq, &out, &e) < 0 ? -1 : 0;
	strbuf_release(&path);
	strbuf_release(&out);
	if (rc && kube_err_is_already_exists(&e)) /* made by someone else meanwhile: theirs */
		return 0;
	if (rc) {
		fprintf(stderr, "kcsi up: creating CRD %s: HTTP %d: %s\n", m->name, e.code, e.message);
		return -1;
	}
	*created = true;
	return 0;
}

static int wait_established(struct kube_client *kc, const char *name, int64_t deadline)
{
	for (;;) {
		struct kube_err e = { 0 };
		json_t *crd = kube_get(kc, &CRDS, NULL, name, &e);
		bool ok = crd && has_condition(crd, "Established", "True");
		json_decref(crd);
		if (ok)
			return 0;
		if (mono_now_ns() > deadline) {
			fprintf(stderr, "kcsi up: CRD %s was not Established in time\n", name);
			return -1;
		}
		sleep_ns(50 * NSEC_PER_MSEC);
	}
}

int up_crds_install(struct kube_client *kc, struct up_crds *st, int64_t deadline)
{
	for (const struct up_crd_manifest *m = up_snapshot_crds; m->name; m++) {
		bool created;
		if (create_one(kc, m, &created))
			return -1;
		if (created && st->n < UP_MAX_CRDS)
			st->installed[st->n++] = m->name;
	}
	for (int i = 0; i < st->n; i++)
		if (wait_established(kc, st->installed[i], deadline))
			return -1;
	if (st->n)
		printf("kcsi up: installed %d snapshot CRD%s (deleted again at exit)\n", st->n,
		       st->n == 1 ? "" : "s");
	fflush(stdout);
	return 0;
}

/* Why a deleted CRD is still there: the API server's condition on its instances. */
static void report_left(json_t *crd, const char *name)
{
	size_t i;
	json_t *c;
	const char *why = "still terminating";
	json_array_foreach(json_object_get(json_object_get(crd, "status"), "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *msg = json_string_value(json_object_get(c, "message"));
		if (t && msg && !strcmp(t, "Terminating"))
			why = msg;
	}
	fprintf(stderr, "kcsi up: CRD %s is not gone: %s (delete the snapshots before stopping kcsi "
			"up; their finalizers need the snapshot components)\n", name, why);
}

int up_crds_remove(struct kube_client *kc, struct up_crds *st, int64_t wait_ns)
{
	for (int i = st->n - 1; i >= 0; i--) {
		struct kube_err e = { 0 };
		if (kube_delete(kc, &CRDS, NULL, st->installed[i], NULL, NULL, &e) &&
		    !kube_err_is_not_found(&e))
			fprintf(stderr, "kcsi up: could not delete CRD %s: %s\n", st->installed[i],
				e.message);
	}
	int64_t deadline = mono_now_ns() + wait_ns;
	int left;
	for (;;) {
		left = 0;
		bool last = mono_now_ns() > deadline;
		for (int i = 0; i < st->n; i++) {
			struct kube_err e = { 0 };
			json_t *crd = kube_get(kc, &CRDS, NULL, st->installed[i], &e);
			if (!crd && kube_err_is_not_found(&e))
				continue;
			left++;
			if (last)
				report_left(crd, st->installed[i]);
			json_decref(crd);
		}
		if (!left || last)
			break;
		sleep_ns(100 * NSEC_PER_MSEC);
	}
	if (!left && st->n)
		printf("kcsi up: deleted the %d snapshot CRD%s it installed\n", st->n,
		       st->n == 1 ? "" : "s");
	st->n = 0;
	return left;
}
