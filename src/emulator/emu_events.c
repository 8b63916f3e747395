/* emu_events: events.k8s.io/v1 as a view of the core v1 Events (emu_events.h). */
#include "emulator/emu_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "emulator/emu_store.h"

/* core v1 name, events.k8s.io/v1 name */
static const char *const renames[][2] = {
	{ "involvedObject", "regarding" },
	{ "message", "note" },
	{ "reportingComponent", "reportingController" },
	{ "source", "deprecatedSource" },
	{ "firstTimestamp", "deprecatedFirstTimestamp" },
	{ "lastTimestamp", "deprecatedLastTimestamp" },
	{ "count", "deprecatedCount" },
};
#define NRENAMES (sizeof(renames) / sizeof(renames[0]))

bool emu_events_is_view(const struct emu_resource *r)
{
	return !strcmp(r->group, "events.k8s.io") && !strcmp(r->plural, "events");
}

/* Moves obj[from] to obj[to] (a missing one removes to: a patch's keys are moved as they are). */
static void rename_key(json_t *obj, const char *from, const char *to)
{
	json_t *v = json_object_get(obj, from);
	if (!v)
		return;
	json_object_set(obj, to, v);
	json_object_del(obj, from);
}

/* Go's encoding of events/v1.Event leaves these out when empty (omitempty on a string or int). */
static void drop_empty(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	if ((json_is_string(v) && !*json_string_value(v)) || (json_is_integer(v) && !json_integer_value(v)))
		json_object_del(obj, key);
}

void emu_event_to_served(json_t *obj)
{
	if (!json_is_object(obj))
		return;
	for (size_t i = 0; i < NRENAMES; i++)
		rename_key(obj, renames[i][0], renames[i][1]);
	const json_t *av = json_object_get(obj, "apiVersion");
	if (json_is_string(av))
		json_object_set_new(obj, "apiVersion", json_string("events.k8s.io/v1"));
	static const char *const omitempty[] = { "reportingController", "reportingInstance",
						 "action", "reason", "note", "type",
						 "deprecatedCount" };
	for (size_t i = 0; i < sizeof(omitempty) / sizeof(omitempty[0]); i++)
		drop_empty(obj, omitempty[i]);
	/* non-pointer structs and eventTime (no omitempty) are always written */
	static const char *const always[][2] = { { "eventTime", "null" },
						 { "regarding", "{}" },
						 { "deprecatedSource", "{}" },
						 { "deprecatedFirstTimestamp", "null" },
						 { "deprecatedLastTimestamp", "null" } };
	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		if (!json_object_get(obj, always[i][0]))
			json_object_set_new(obj, always[i][0],
					    !strcmp(always[i][1], "null") ? json_null() : json_object());
}

/* "/note/x" -> "/message/x": a JSON pointer's first segment in core terms (text is replaced). */
static void pointer_to_stored(json_t *op, const char *key)
{
	const char *p = json_string_value(json_object_get(op, key));
	if (!p || p[0] != '/')
		return;
	size_t n = strcspn(p + 1, "/");
	for (size_t i = 0; i < NRENAMES; i++)
		if (strlen(renames[i][1]) == n && !strncmp(p + 1, renames[i][1], n)) {
			struct strbuf t = STRBUF_INIT;
			strbuf_addf(&t, "/%s%s", renames[i][0], p + 1 + n);
			json_object_set_new(op, key, json_string(t.buf));
			strbuf_release(&t);
			return;
		}
}

void emu_event_to_stored(json_t *body)
{
	size_t i;
	json_t *op;
	if (json_is_array(body)) {
		json_array_foreach(body, i, op) {
			pointer_to_stored(op, "path");
			pointer_to_stored(op, "from");
		}
		return;
	}
	if (!json_is_object(body))
		return;
	for (i = 0; i < NRENAMES; i++)
		rename_key(body, renames[i][1], renames[i][0]);
	const char *av = json_string_value(json_object_get(body, "apiVersion"));
	if (av && !strcmp(av, "events.k8s.io/v1"))
		json_object_set_new(body, "apiVersion", json_string("v1"));
}

/* The field labels events.k8s.io/v1 accepts, and what they are in core terms. */
static const char *const field_labels[][2] = {
	{ "reason", "reason" },
	{ "regarding.kind", "involvedObject.kind" },
	{ "regarding.namespace", "involvedObject.namespace" },
	{ "regarding.name", "involvedObject.name" },
	{ "regarding.uid", "involvedObject.uid" },
	{ "regarding.apiVersion", "involvedObject.apiVersion" },
	{ "regarding.resourceVersion", "involvedObject.resourceVersion" },
	{ "regarding.fieldPath", "involvedObject.fieldPath" },
	{ "reportingController", "reportingComponent" },
	{ "type", "type" },
	{ "metadata.namespace", "metadata.namespace" },
	{ "metadata.name", "metadata.name" },
};

char *emu_event_fields_to_stored(const char *selector, char *err, size_t errlen)
{
	struct strbuf out = STRBUF_INIT;
	const char *p = selector ? selector : "";
	while (*p) {
		/* one requirement: KEY (=|==|!=) VALUE, up to a comma not escaped by a backslash */
		const char *end = p;
		while (*end && *end != ',')
			end += end[0] == '\\' && end[1] ? 2 : 1;
		size_t klen = 0;
		while (p + klen < end && p[klen] != '=' && p[klen] != '!')
			klen++;
		size_t k0 = 0; /* kube-apiserver trims the key */
		while (k0 < klen && p[k0] == ' ')
			k0++;
		size_t k1 = klen;
		while (k1 > k0 && p[k1 - 1] == ' ')
			k1--;
		const char *mapped = NULL;
		for (size_t i = 0; i < sizeof(field_labels) / sizeof(field_labels[0]) && !mapped; i++)
			if (strlen(field_labels[i][0]) == k1 - k0 &&
			    !strncmp(p + k0, field_labels[i][0], k1 - k0))
				mapped = field_labels[i][1];
		if (!mapped && k1 > k0) {
			snprintf(err, errlen, "field label not supported: %.*s", (int)(k1 - k0), p + k0);
			strbuf_release(&out);
			return NULL;
		}
		if (out.len)
			strbuf_addch(&out, ',');
		if (mapped)
			strbuf_addstr(&out, mapped);
		strbuf_add(&out, p + klen, (size_t)(end - p - klen));
		p = *end ? end + 1 : end;
	}
	return strbuf_detach(&out, NULL);
}

static const char *str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

/* A time field is set when it holds anything but null or "". */
static bool time_set(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return v && !json_is_null(v) && !(json_is_string(v) && !*json_string_value(v));
}

/* A DNS-1123 subdomain's characters, as ValidateQualifiedName's name part (no prefix). */
static bool qualified_name(const char *s)
{
	const char *slash = strchr(s, '/');
	const char *name = slash ? slash + 1 : s;
	size_t n = strlen(name);
	if (!n || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

#define REQUIRED(f)                                            \
	do {                                                   \
		*cause = "FieldValueRequired";                 \
		snprintf(detail, len, "Required value");       \
		return f;                                      \
	} while (0)
#define INVALID(f, ...)                                        \
	do {                                                   \
		*cause = "FieldValueInvalid";                  \
		snprintf(detail, len, "Invalid value: \"\": " __VA_ARGS__); \
		return f;                                      \
	} while (0)

const char *emu_event_create_invalid(const json_t *obj, const char *req_ns, const char **cause,
				     char *detail, size_t len)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *ns = str(meta, "namespace");
	if (!*ns && req_ns)
		ns = req_ns;
	const json_t *regarding = json_object_get(obj, "regarding");
	bool event_time = time_set(obj, "eventTime");
	/* the legacy rules, which every Event meets */
	if (event_time) {
		if (!*str(regarding, "namespace") && strcmp(ns, "default") && strcmp(ns, "kube-system")) {
			*cause = "FieldValueInvalid";
			snprintf(detail, len, "Invalid value: \"\": does not match event.namespace");
			return "involvedObject.namespace";
		}
		if (!*str(obj, "reportingController"))
			REQUIRED("reportingController");
		if (!qualified_name(str(obj, "reportingController")))
			INVALID("reportingController", "name part must consist of alphanumeric characters, "
				"'-', '_' or '.', and must start and end with an alphanumeric character");
		if (!*str(obj, "reportingInstance"))
			REQUIRED("reportingInstance");
		if (strlen(str(obj, "reportingInstance")) > 128)
			INVALID("reportingInstance", "can have at most 128 characters");
		if (!*str(obj, "action"))
			REQUIRED("action");
		if (strlen(str(obj, "action")) > 128)
			INVALID("action", "can have at most 128 characters");
		if (!*str(obj, "reason"))
			REQUIRED("reason");
		if (strlen(str(obj, "reason")) > 128)
			INVALID("reason", "can have at most 128 characters");
		if (strlen(str(obj, "note")) > 1024)
			INVALID("message", "can have at most 1024 characters");
	} else {
		const char *rns = str(regarding, "namespace");
		if (*rns ? strcmp(ns, rns) != 0 : (*ns && strcmp(ns, "default"))) {
			*cause = "FieldValueInvalid";
			snprintf(detail, len, "Invalid value: \"%.100s\": does not match event.namespace",
				 rns);
			return "involvedObject.namespace";
		}
	}
	/* the strict rules of events.k8s.io/v1 */
	const json_t *series = json_object_get(obj, "series");
	if (json_is_object(series)) {
		if (json_integer_value(json_object_get(series, "count")) < 2)
			INVALID("series.count", "should be at least 2");
		if (!time_set(series, "lastObservedTime"))
			REQUIRED("series.lastObservedTime");
	}
	if (!event_time)
		REQUIRED("eventTime");
	const char *type = str(obj, "type");
	if (strcmp(type, "Normal") && strcmp(type, "Warning"))
		INVALID("type", "has invalid value: %.100s", type);
	if (time_set(obj, "deprecatedFirstTimestamp"))
		INVALID("firstTimestamp", "needs to be unset");
	if (time_set(obj, "deprecatedLastTimestamp"))
		INVALID("lastTimestamp", "needs to be unset");
	if (json_integer_value(json_object_get(obj, "deprecatedCount")))
		INVALID("count", "needs to be unset");
	const json_t *src = json_object_get(obj, "deprecatedSource");
	if (*str(src, "component") || *str(src, "host"))
		INVALID("source", "needs to be unset");
	return NULL;
}

const char *emu_event_update_invalid(const json_t *old, const json_t *new, char *detail,
				     size_t len)
{
	/* ValidateEventUpdate's order; core names (eventTime compared to the microsecond, as the
	 * stored text is) */
	static const char *const frozen[] = { "involvedObject", "reason", "message", "source",
					      "firstTimestamp", "lastTimestamp", "count", "type",
					      "eventTime", "action", "related", "reportingComponent",
					      "reportingInstance" };
	for (size_t i = 0; i < sizeof(frozen) / sizeof(frozen[0]); i++) {
		const json_t *a = json_object_get(old, frozen[i]), *b = json_object_get(new, frozen[i]);
		bool a_empty = !a || json_is_null(a) || (json_is_string(a) && !*json_string_value(a)) ||
			       (json_is_integer(a) && !json_integer_value(a));
		bool b_empty = !b || json_is_null(b) || (json_is_string(b) && !*json_string_value(b)) ||
			       (json_is_integer(b) && !json_integer_value(b));
		if ((a_empty && b_empty) || (a && b && json_equal((json_t *)a, (json_t *)b)))
			continue;
		if (json_is_string(b)) {
			snprintf(detail, len, "Invalid value: \"%.200s\": field is immutable",
				 json_string_value(b));
		} else if (json_is_integer(b)) {
			snprintf(detail, len, "Invalid value: %lld: field is immutable",
				 (long long)json_integer_value(b));
		} else {
			char *text = b ? json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
			snprintf(detail, len, "Invalid value: %.200s: field is immutable",
				 text ? text : "null");
			free(text);
		}
		return !strcmp(frozen[i], "reportingComponent") ? "reportingController" : frozen[i];
	}
	return NULL;
}
