/* te_plan: the taint-eviction controller's decisions as pure functions (see te.h). */
#include "controllers/te.h"

#include "base/timeutil.h"
#include "controllers/vs.h"

#include <string.h>

enum te_verdict te_decide(const struct kube_taint *taints, size_t ntaints,
			  const struct kube_toleration *tols, size_t ntols, int64_t *seconds)
{
	bool any = false, timed = false;
	int64_t min = 0;

	*seconds = 0;
	for (size_t i = 0; i < ntaints; i++) {
		const struct kube_toleration *used = NULL;
		if (!taints[i].effect || strcmp(taints[i].effect, "NoExecute"))
			continue;
		any = true;
		for (size_t k = 0; k < ntols && !used; k++)
			if (vs_tolerates(&tols[k], &taints[i]))
				used = &tols[k];
		if (!used)
			return TE_NOW;
		if (!used->has_seconds)
			continue;
		if (used->seconds <= 0)
			return TE_NOW; /* upstream: zero or less is no wait at all */
		if (!timed || used->seconds < min)
			min = used->seconds;
		timed = true;
	}
	if (!any || !timed)
		return TE_KEEP;
	*seconds = min;
	return TE_AFTER;
}

enum te_change te_schedule(struct te_sched *s, enum te_verdict v, int64_t seconds, int64_t now_ns)
{
	bool had = s->set;

	if (v == TE_KEEP) {
		memset(s, 0, sizeof(*s));
		return had ? TE_CANCELLED : TE_UNCHANGED;
	}
	if (v == TE_NOW) {
		if (had && s->fire_ns <= now_ns)
			return TE_UNCHANGED; /* already due */
		*s = (struct te_sched){ true, now_ns, now_ns };
		return had ? TE_RESCHEDULED : TE_SCHEDULED;
	}
	if (had)
		return TE_UNCHANGED; /* the clock started when the taint was first seen */
	*s = (struct te_sched){ true, now_ns, now_ns + seconds * NSEC_PER_SEC };
	return TE_SCHEDULED;
}
