/*
 * kube-whoami: who the API server takes kcsi's client for, for the e2e test of the credentials
 * (tests/e2e/kube_client_certs.sh). It loads the kubeconfig as every component does, POSTs a
 * SelfSubjectReview (authentication.k8s.io/v1, as `kubectl auth whoami`) and prints
 * "USER <username>" and "GROUPS <group>,<group>..."; exit 1 with the error on stderr when the
 * configuration or the request fails. Never shipped: built into build/tests only.
 */
#include <jansson.h>
#include <stdio.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "kube/client.h"
#include "kube/config.h"

static const struct kube_resource SELF_SUBJECT_REVIEWS = { "authentication.k8s.io", "v1",
							    "selfsubjectreviews", false };

static void print_user(const json_t *review)
{
	const json_t *ui = json_object_get(json_object_get(review, "status"), "userInfo");
	const char *name = json_string_value(json_object_get(ui, "username"));
	printf("USER %s\nGROUPS ", name ? name : "");
	const json_t *groups = json_object_get(ui, "groups");
	size_t i;
	const json_t *g;
	json_array_foreach(groups, i, g)
		printf("%s%s", i ? "," : "", json_string_value(g) ? json_string_value(g) : "");
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *kubeconfig;
	struct flagset *fs = flags_new("kube-whoami", "kube-whoami --kubeconfig FILE");
	flags_string(fs, "kubeconfig", &kubeconfig, "", "Path to the kubeconfig.");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);

	char err[512];
	struct kube_config *cfg = kube_config_load(kubeconfig, NULL, NULL, err, sizeof(err));
	if (!cfg) {
		fprintf(stderr, "kube-whoami: %s\n", err);
		return 1;
	}
	struct kube_client_opts co = { .component = "kube-whoami", .max_retries = 1 };
	struct kube_client *c = kube_client_new(cfg, &co, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "kube-whoami: %s\n", err);
		kube_config_free(cfg);
		return 1;
	}
	json_t *rq = json_pack("{s:s, s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
			       "SelfSubjectReview");
	struct kube_err e = { 0 };
	json_t *review = kube_create(c, &SELF_SUBJECT_REVIEWS, NULL, rq, &e);
	json_decref(rq);
	int rc = 0;
	if (review) {
		print_user(review);
		json_decref(review);
	} else {
		fprintf(stderr, "kube-whoami: HTTP %d %s: %s\n", e.code, e.reason, e.message);
		rc = 1;
	}
	kube_client_free(c);
	kube_config_free(cfg);
	flags_free(fs);
	return rc;
}
