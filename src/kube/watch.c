/*
 * Lines are assembled in one strbuf; complete lines inside a chunk are parsed in place without
 * copying, so the common case (many small events per chunk) touches each byte once.
 */
#include "kube/watch.h"

#include <stdio.h>
#include <string.h>

void kube_watch_decoder_init(struct kube_watch_decoder *d, size_t max_event)
{
	strbuf_init(&d->line, 0);
	d->max_event = max_event ? max_event : KUBE_WATCH_MAX_EVENT;
	d->err[0] = 0;
}

void kube_watch_decoder_release(struct kube_watch_decoder *d)
{
	strbuf_release(&d->line);
}

static int one_event(struct kube_watch_decoder *d, const char *p, size_t n, kube_watch_event_fn fn,
		     void *ud)
{
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (!n)
		return 0;
	json_error_t jerr;
	json_t *ev = json_loadb(p, n, 0, &jerr);
	if (!ev) {
		snprintf(d->err, sizeof(d->err), "malformed watch event: %s", jerr.text);
		return -1;
	}
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	static const char *names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	int t = -1;
	for (int i = 0; type && i < 5; i++)
		if (strcmp(type, names[i]) == 0)
			t = i;
	int rc;
	if (t < 0 || !json_is_object(obj)) {
		snprintf(d->err, sizeof(d->err), "watch event with %s", t < 0 ? "an unknown type" : "no object");
		rc = -1;
	} else {
		rc = fn((enum kube_watch_type)t, obj, ud);
	}
	json_decref(ev);
	return rc;
}

int kube_watch_feed(struct kube_watch_decoder *d, const char *data, size_t len,
		    kube_watch_event_fn fn, void *ud)
{
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;
		if (d->line.len + take > d->max_event) {
			snprintf(d->err, sizeof(d->err), "watch event larger than %zu bytes", d->max_event);
			strbuf_reset(&d->line);
			return -1;
		}
		if (!nl) {
			strbuf_add(&d->line, data, take);
			return 0;
		}
		int rc;
		if (d->line.len) {
			strbuf_add(&d->line, data, take);
			rc = one_event(d, d->line.buf, d->line.len, fn, ud);
			strbuf_reset(&d->line);
		} else {
			rc = one_event(d, data, take, fn, ud);
		}
		if (rc)
			return rc;
		data += take + 1;
		len -= take + 1;
	}
	return 0;
}
