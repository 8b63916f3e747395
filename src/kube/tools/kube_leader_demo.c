/*
 * kube-leader-demo: a minimal process that takes part in a leader election, for the e2e test of
 * src/kube/leader.c. It prints "LEADING <identity>" when it acquires the lease and exits 0 after
 * releasing it on SIGTERM; on losing the lease it exits like the sidecars do.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/timeutil.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader.h"

static void started(void *ud)
{
	printf("LEADING %s\n", (const char *)ud);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *kubeconfig, *name, *identity, *ns;
	int64_t lease, renew, retry;
	struct flagset *fs = flags_new("kube-leader-demo", "kube-leader-demo [flags]");
	flags_string(fs, "kubeconfig", &kubeconfig, "", "Path to the kubeconfig.");
	flags_string(fs, "lease-name", &name, "kcsi-demo", "Name of the Lease.");
	flags_string(fs, "identity", &identity, "", "Holder identity (default: hostname_random).");
	flags_string(fs, "leader-election-namespace", &ns, "", "Namespace of the Lease.");
	flags_duration(fs, "leader-election-lease-duration", &lease, 15 * NSEC_PER_SEC, "Lease duration.");
	flags_duration(fs, "leader-election-renew-deadline", &renew, 10 * NSEC_PER_SEC, "Renew deadline.");
	flags_duration(fs, "leader-election-retry-period", &retry, 5 * NSEC_PER_SEC, "Retry period.");
	log_register_flags(fs);
	flags_parse_or_exit(fs, argc, argv);

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	char err[512];
	struct kube_config *cfg = kube_config_load(kubeconfig, NULL, NULL, err, sizeof(err));
	if (!cfg)
		KLOG_F("%s", err);
	struct kube_client_opts co = { .component = "kube-leader-demo", .qps = 5, .burst = 10 };
	struct kube_client *c = kube_client_new(cfg, &co, err, sizeof(err));
	if (!c)
		KLOG_F("%s", err);
	struct kube_leader_opts lo = { .ns = ns, .name = name, .identity = identity,
				       .lease_duration_ns = lease, .renew_deadline_ns = renew,
				       .retry_period_ns = retry, .on_started_leading = started };
	char id[300];
	if (!*identity) {
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		snprintf(id, sizeof(id), "%s_%d", host, (int)getpid());
		lo.identity = id;
	}
	lo.ud = (void *)lo.identity;
	struct kube_leader *le = kube_leader_new(c, &lo);
	kube_leader_start(le);
	int sig;
	sigwait(&set, &sig);
	kube_leader_free(le); /* releases the lease when leading */
	printf("STOPPED\n");
	kube_client_free(c);
	kube_config_free(cfg);
	flags_free(fs);
	return 0;
}
