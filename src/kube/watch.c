/*
 * Lines are assembled in one strbuf; complete lines inside a chunk are parsed in place without
 * copying, so the common case (many small events per chunk) touches each byte once. Each event
 * is parsed into the decoder's jv document, whose buffers are reused: no allocation per event.
 */
#include "kube/watch.h"

#include <stdio.h>
#include <string.h>

void kube_watch_decoder_init(struct kube_watch_decoder *d, size_t max_event)
{
	strbuf_init(&d->line, 0);
	memset(&d->doc, 0, sizeof(d->doc));
	d->max_event = max_event ? max_event : KUBE_WATCH_MAX_EVENT;
	d->err[0] = 0;
}

void kube_watch_decoder_release(struct kube_watch_decoder *d)
{
	strbuf_release(&d->line);
	jv_release(&d->doc);
}

static int one_event(struct kube_watch_decoder *d, const char *p, size_t n, kube_watch_event_fn fn,
		     void *ud)
{
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (!n)
		return 0;
	char jerr[160];
	const jv_t *ev = jv_parse(&d->doc, p, n, jerr, sizeof(jerr));
	if (!ev) {
		snprintf(d->err, sizeof(d->err), "malformed watch event: %s", jerr);
		return -1;
	}
	const char *type = jv_str(jv_get(ev, "type"));
	const jv_t *obj = jv_get(ev, "object");
	static const char *names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	int t = -1;
	for (int i = 0; type && i < 5; i++)
		if (strcmp(type, names[i]) == 0)
			t = i;
	int rc;
	if (t < 0 || !jv_is_object(obj)) {
		snprintf(d->err, sizeof(d->err), "watch event with %s", t < 0 ? "an unknown type" : "no object");
		rc = -1;
	} else {
		rc = fn((enum kube_watch_type)t, obj, ud);
	}
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
