/*
 * nl_zone: nodelifecycle's zone states and NoExecute rate limiters as pure functions (see nl.h;
 * upstream's ComputeZoneState, handleDisruption, setLimiterInZone, and the token bucket of the
 * per-zone tainting queue, burst 1).
 */
#include "controllers/nl.h"

#include "base/timeutil.h"

enum nl_zone_state nl_zone_state(int ready, int not_ready, double threshold)
{
	if (ready == 0 && not_ready > 0)
		return NL_ZONE_FULL;
	if (not_ready > 2 && (double)not_ready / (double)(not_ready + ready) >= threshold)
		return NL_ZONE_PARTIAL;
	return NL_ZONE_NORMAL;
}

static void refill(struct nl_zone *z, int64_t now_ns)
{
	if (z->rate > 0 && now_ns > z->refilled_ns) {
		z->tokens += z->rate * (double)(now_ns - z->refilled_ns) / (double)NSEC_PER_SEC;
		if (z->tokens > 1)
			z->tokens = 1;
	}
	z->refilled_ns = now_ns;
}

/* upstream's SwapLimiter: a new bucket, full unless the old one was waiting (then drained). */
static void set_rate(struct nl_zone *z, double rate, int64_t now_ns)
{
	if (rate == z->rate)
		return;
	refill(z, now_ns);
	z->tokens = rate <= 0 ? 0 : z->tokens >= 1 ? 1 : 0;
	z->rate = rate > 0 ? rate : 0;
}

static double rate_for(const struct nl_zone *z, enum nl_zone_state s, const struct nl_rates *r)
{
	if (s == NL_ZONE_PARTIAL) /* small zones stop evicting; large ones slow down */
		return z->ready + z->not_ready > r->large ? r->secondary : 0;
	return r->primary; /* Normal, and a zone fully down while others are not */
}

enum nl_disruption nl_zones_update(struct nl_zone *z, size_t n, const struct nl_rates *r,
				   int64_t now_ns)
{
	bool all_are = n > 0, all_were = true;

	for (size_t i = 0; i < n; i++) {
		all_are = all_are && nl_zone_state(z[i].ready, z[i].not_ready, r->threshold) ==
				     NL_ZONE_FULL;
		all_were = all_were && z[i].state == NL_ZONE_FULL;
	}
	if (!n)
		return NL_DISRUPTION_NONE;
	if (all_are && all_were)
		return NL_DISRUPTION_IN;
	if (all_are) {
		for (size_t i = 0; i < n; i++) {
			set_rate(&z[i], 0, now_ns);
			z[i].state = NL_ZONE_FULL;
		}
		return NL_DISRUPTION_ENTER;
	}
	for (size_t i = 0; i < n; i++) {
		enum nl_zone_state s = nl_zone_state(z[i].ready, z[i].not_ready, r->threshold);
		if (!all_were && z[i].state == s)
			continue;
		set_rate(&z[i], rate_for(&z[i], s, r), now_ns);
		z[i].state = (uint8_t)s;
	}
	return all_were ? NL_DISRUPTION_EXIT : NL_DISRUPTION_NONE;
}

bool nl_zone_take(struct nl_zone *z, int64_t now_ns)
{
	refill(z, now_ns);
	if (z->rate <= 0 || z->tokens < 1)
		return false;
	z->tokens -= 1;
	return true;
}
