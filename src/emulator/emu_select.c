/*
 * emu_select: the emulator's side of selectors: how a requirement's key finds its value in a
 * stored JSON object. Parsing and the match over requirements are kube/selector.c's.
 */
#include "emulator/emu_select.h"

#include <stdio.h>
#include <string.h>

static const char *label_lookup(void *arg, const char *key, char *tmp, size_t tmplen)
{
	const json_t *labels = arg, *v;
	(void)tmp;
	(void)tmplen;
	v = json_is_object(labels) ? json_object_get(labels, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

bool emu_selector_match_labels(const struct kube_selector *sel, const json_t *labels)
{
	return kube_selector_match(sel, label_lookup, (void *)labels);
}

const char *emu_json_path_string(const json_t *obj, const char *path, char *tmp, size_t tmplen)
{
	const json_t *cur = obj;
	const char *p = path;
	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char key[128];
		if (n >= sizeof(key) || !json_is_object(cur))
			return "";
		memcpy(key, p, n);
		key[n] = '\0';
		cur = json_object_get(cur, key);
		p += n + (dot ? 1 : 0);
	}
	if (json_is_string(cur))
		return json_string_value(cur);
	if (json_is_integer(cur)) {
		snprintf(tmp, tmplen, "%lld", (long long)json_integer_value(cur));
		return tmp;
	}
	if (json_is_boolean(cur))
		return json_is_true(cur) ? "true" : "false";
	return "";
}

static const char *field_lookup(void *arg, const char *key, char *tmp, size_t tmplen)
{
	return emu_json_path_string(arg, key, tmp, tmplen);
}

bool emu_selector_match_fields(const struct kube_selector *sel, const json_t *obj)
{
	return kube_selector_match(sel, field_lookup, (void *)obj);
}
