/*
 * featuregate: component-base's SetFromMap rules over a flag_map (see featuregate.h). The tables
 * are small (a binary's own few gates, about forty generic ones), so lookups are linear.
 */
#include "base/featuregate.h"

#include "base/flags.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>

/* Go's strconv.ParseBool; the value is trimmed of spaces as MapStringBool trims it. */
static int parse_go_bool(const char *s, bool *out)
{
	static const char *const truths[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const falses[] = { "0", "f", "F", "FALSE", "false", "False" };
	char buf[16];
	size_t n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	for (size_t i = 0; i < 6; i++) {
		if (!strcmp(buf, truths[i]))
			return *out = true, 0;
		if (!strcmp(buf, falses[i]))
			return *out = false, 0;
	}
	return -1;
}

static const struct feature_gate *find(const struct feature_gate *own, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(own[i].name, name))
			return &own[i];
	for (size_t i = 0; i < feature_gates_generic_len; i++)
		if (!strcmp(feature_gates_generic[i].name, name))
			return &feature_gates_generic[i];
	return NULL;
}

int feature_gates_check(const struct flag_map *m, const struct feature_gate *own, size_t n,
			char *err, size_t errlen)
{
	for (size_t i = 0; i < m->len; i++) {
		const char *k = m->items[i].key, *v = m->items[i].value;
		bool on;

		if (parse_go_bool(v, &on)) {
			snprintf(err, errlen,
				 "invalid value of %s=%s, err: strconv.ParseBool: parsing \"%s\": invalid syntax",
				 k, v, v);
			return -1;
		}
		if (!strcmp(k, "AllAlpha") || !strcmp(k, "AllBeta"))
			continue;
		const struct feature_gate *g = find(own, n, k);
		if (!g) {
			snprintf(err, errlen, "unrecognized feature gate: %s", k);
			return -1;
		}
		if (g->locked && on != g->def) {
			snprintf(err, errlen, "cannot set feature gate %s to %s, feature is locked to %s",
				 k, on ? "true" : "false", g->def ? "true" : "false");
			return -1;
		}
		if (g->stage == FG_GA || g->stage == FG_DEPRECATED)
			KLOG_I("Warning: setting %s feature gate. It will be removed in a future release. featureGate=\"%s\" value=%s",
			       g->stage == FG_GA ? "GA" : "deprecated", k, on ? "true" : "false");
	}
	return 0;
}

bool feature_gate_enabled(const struct flag_map *m, const struct feature_gate *own, size_t n,
			  const char *name)
{
	const struct feature_gate *g = find(own, n, name);
	const char *v = flag_map_get(m, name);
	bool on;

	if (!g)
		return false;
	if (v && !parse_go_bool(v, &on))
		return on;
	if (!g->locked && (g->stage == FG_ALPHA || g->stage == FG_BETA)) {
		v = flag_map_get(m, g->stage == FG_ALPHA ? "AllAlpha" : "AllBeta");
		if (v && !parse_go_bool(v, &on))
			return on;
	}
	return g->def;
}
