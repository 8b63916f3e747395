/* Flag registration only: names and defaults match the upstream sidecars; help text is ours. */
#include "kube/options.h"

#include "base/flags.h"
#include "base/timeutil.h"

void kube_options_register(struct flagset *fs, struct kube_options *o)
{
	flags_string(fs, "kubeconfig", &o->kubeconfig, "",
		     "Path to a kubeconfig; empty means in-cluster configuration.");
	flags_string(fs, "master", &o->master, "",
		     "API server URL; overrides the kubeconfig's server.");
	flags_double(fs, "kube-api-qps", &o->qps, 5,
		     "Sustained rate of requests per second to the API server.");
	flags_int(fs, "kube-api-burst", &o->burst, 10,
		  "Requests allowed above --kube-api-qps in a burst.");
	flags_duration(fs, "resync", &o->resync_ns, 10 * NSEC_PER_MIN,
		       "How often every cached object is processed again.");
	flags_duration(fs, "retry-interval-start", &o->retry_start_ns, NSEC_PER_SEC,
		       "First delay before retrying a failed operation; doubles per failure.");
	flags_duration(fs, "retry-interval-max", &o->retry_max_ns, 5 * NSEC_PER_MIN,
		       "Longest delay between retries of a failed operation.");
	flags_bool(fs, "leader-election", &o->leader_election, false,
		   "Run only while holding a Lease, so replicas can stand by.");
	flags_string(fs, "leader-election-namespace", &o->le_namespace, "",
		     "Namespace of the Lease; empty means the pod's own namespace.");
	flags_duration(fs, "leader-election-lease-duration", &o->le_lease_ns, 15 * NSEC_PER_SEC,
		       "How long a standby waits after the last renewal before taking over.");
	flags_duration(fs, "leader-election-renew-deadline", &o->le_renew_ns, 10 * NSEC_PER_SEC,
		       "How long the leader keeps retrying a renewal before giving up.");
	flags_duration(fs, "leader-election-retry-period", &o->le_retry_ns, 5 * NSEC_PER_SEC,
		       "Interval between attempts to acquire or renew the Lease.");
}
