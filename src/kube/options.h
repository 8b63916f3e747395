/*
 * kube options: the Kubernetes-client flags every kcsi sidecar shares, with the upstream names
 * and defaults, so each cmd/<binary>/main.c registers them with one call:
 *
 *   --kubeconfig ""                      --master ""
 *   --kube-api-qps 5                     --kube-api-burst 10
 *   --resync 10m0s
 *   --retry-interval-start 1s            --retry-interval-max 5m0s
 *   --leader-election false              --leader-election-namespace ""
 *   --leader-election-lease-duration 15s --leader-election-renew-deadline 10s
 *   --leader-election-retry-period 5s
 *
 * The struct is filled by flags_parse(); string fields point into the flagset's memory.
 */
#ifndef KCSI_KUBE_OPTIONS_H
#define KCSI_KUBE_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

struct flagset;

struct kube_options {
	const char *kubeconfig;
	const char *master;
	double qps;
	int burst;
	int64_t resync_ns;
	int64_t retry_start_ns, retry_max_ns;
	bool leader_election;
	const char *le_namespace;
	int64_t le_lease_ns, le_renew_ns, le_retry_ns;
};

void kube_options_register(struct flagset *fs, struct kube_options *o);

#endif
