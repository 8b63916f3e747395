/*
 * The Secret reader every component shares (secret.h). Design: one GET into one buffer sized up
 * front, parsed by jansson, decoded into one block that holds every key and value (so one
 * explicit_bzero() covers them all), and every intermediate copy wiped before it is freed: the
 * answer's text, the tree's base64 strings, a value refused half-way. The base64 decoder is
 * Go's StdEncoding rules restated (strict padding, "\r\n" skipped, the same error offsets), since
 * what the Go client refuses when it decodes a Secret is what upstream's components refuse.
 */
#include "kube/secret.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

/* A Secret is at most 1 MiB; most are a few hundred bytes. */
#define ANSWER_PRESIZE (64 * 1024)

void (*kube_secret_free_hook)(const void *block, size_t len);

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static size_t skip_newlines(const char *in, size_t n, size_t si)
{
	while (si < n && (in[si] == '\n' || in[si] == '\r'))
		si++;
	return si;
}

/*
 * One quantum of up to four characters into out (Go's decodeQuantum): the bytes written (0 at
 * the end of the input), *si advanced, *last set when padding ended the input; -1 with *bad.
 */
static int quantum(const char *in, size_t n, size_t *si, unsigned char *out, bool *last,
		   size_t *bad)
{
	unsigned char d[4] = { 0 };
	int dlen = 4;

	for (int j = 0; j < 4; j++) {
		if (*si == n) {
			if (j == 0)
				return 0;
			*bad = *si - (size_t)j; /* a short quantum: StdEncoding wants its padding */
			return -1;
		}
		unsigned char c = (unsigned char)in[(*si)++];
		int v = b64_value(c);
		if (v >= 0) {
			d[j] = (unsigned char)v;
			continue;
		}
		if (c == '\n' || c == '\r') {
			j--;
			continue;
		}
		if (c != '=' || j < 2) {
			*bad = *si - 1;
			return -1;
		}
		if (j == 2) { /* "==" expected: the second one */
			*si = skip_newlines(in, n, *si);
			if (*si == n) {
				*bad = n;
				return -1;
			}
			if (in[*si] != '=') {
				*bad = *si - 1;
				return -1;
			}
			(*si)++;
		}
		*si = skip_newlines(in, n, *si);
		if (*si < n) {
			*bad = *si; /* something after the padding */
			return -1;
		}
		dlen = j;
		*last = true;
		break;
	}
	uint32_t v = (uint32_t)d[0] << 18 | (uint32_t)d[1] << 12 | (uint32_t)d[2] << 6 | d[3];
	out[0] = (unsigned char)(v >> 16);
	out[1] = (unsigned char)(v >> 8);
	out[2] = (unsigned char)v;
	return dlen - 1;
}

char *kube_base64_decode_strict(const char *in, size_t inlen, size_t *outlen, size_t *bad)
{
	size_t cap = inlen / 4 * 3 + 4, o = 0, si = 0;
	unsigned char *out = xmalloc(cap);
	bool last = false;

	while (!last) {
		unsigned char q[3];
		int k = quantum(in, inlen, &si, q, &last, bad);
		if (k < 0) {
			explicit_bzero(out, cap);
			explicit_bzero(q, sizeof(q));
			free(out);
			return NULL;
		}
		if (k == 0 && !last)
			break; /* the end of the input */
		memcpy(out + o, q, (size_t)k);
		explicit_bzero(q, sizeof(q));
		o += (size_t)k;
	}
	out[o] = '\0';
	*outlen = o;
	return (char *)out;
}

/* UTF-8 as Go's utf8.Valid reads it: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t need;
		unsigned char lo = 0x80, hi = 0xBF;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			need = 1;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		else if (c >= 0xF0 && c <= 0xF4)
			need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		else
			return false;
		if (n - i <= need || s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t k = 2; k <= need; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xBF)
				return false;
		i += need + 1;
	}
	return true;
}

void kube_secret_free(struct kube_secret *s)
{
	if (!s)
		return;
	if (s->mem) {
		explicit_bzero(s->mem, s->memlen);
		if (kube_secret_free_hook)
			kube_secret_free_hook(s->mem, s->memlen);
		free(s->mem);
	}
	free(s->entries);
	memset(s, 0, sizeof(*s));
}

int kube_secret_decode(const json_t *secret, struct kube_secret *out, char *err, size_t errlen)
{
	const json_t *data = json_object_get(secret, "data"), *v;
	const char *key;
	size_t need = 0, at = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(secret)) {
		snprintf(err, errlen, "the answer is not a Secret object");
		return -1;
	}
	if (!data || json_is_null(data))
		return 0;
	if (!json_is_object(data)) {
		snprintf(err, errlen, "data is not a map of keys to base64 strings");
		return -1;
	}
	json_object_foreach((json_t *)data, key, v) {
		if (!json_is_string(v) && !json_is_null(v)) {
			snprintf(err, errlen, "data key \"%s\": the value is not a base64 string", key);
			return -1;
		}
		need += strlen(key) + 1 + json_string_length(v) / 4 * 3 + 4;
	}
	out->entries = xcalloc(json_object_size(data) + 1, sizeof(*out->entries));
	out->memlen = need ? need : 1;
	out->mem = xmalloc(out->memlen);
	json_object_foreach((json_t *)data, key, v) {
		size_t len = 0, bad = 0;
		char *val = json_is_string(v)
			? kube_base64_decode_strict(json_string_value(v), json_string_length(v), &len, &bad)
			: xcalloc(1, 1); /* null: an empty value, as Go decodes it */
		const char *why = NULL;

		if (!val) {
			snprintf(err, errlen, "data key \"%s\": illegal base64 data at input byte %zu", key,
				 bad);
			kube_secret_free(out);
			return -1;
		}
		if (memchr(val, '\0', len))
			why = "the value holds a NUL byte, which kcsi cannot pass in a CSI secret";
		else if (!utf8_valid((const unsigned char *)val, len))
			why = "the value is not valid UTF-8, which a CSI secret (a protobuf string) must be";
		if (why) {
			snprintf(err, errlen, "data key \"%s\": %s", key, why);
			explicit_bzero(val, len);
			free(val);
			kube_secret_free(out);
			return -1;
		}
		struct kube_secret_entry *e = &out->entries[out->n++];
		size_t kl = strlen(key) + 1;
		memcpy(out->mem + at, key, kl);
		e->key = out->mem + at;
		at += kl;
		memcpy(out->mem + at, val, len + 1);
		e->value = out->mem + at;
		e->len = len;
		at += len + 1;
		explicit_bzero(val, len);
		free(val);
	}
	return 0;
}

/* Overwrites the strings of a decoded Secret's data in place before the tree is freed. */
static void wipe_tree(json_t *secret)
{
	const char *key;
	json_t *v;

	json_object_foreach(json_object_get(secret, "data"), key, v)
		if (json_is_string(v))
			explicit_bzero((char *)json_string_value(v), json_string_length(v));
}

int kube_secret_read(struct kube_client *kc, const char *ns, const char *name,
		     struct kube_secret *out, char *err, size_t errlen)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	struct kube_err e;
	json_error_t je;
	json_t *j = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	strbuf_grow(&body, ANSWER_PRESIZE);
	kube_path(&path, &KUBE_RES_SECRETS, ns, name, NULL);
	struct kube_request rq = { .method = "GET", .path = path.buf };
	if (kube_do(kc, &rq, &body, &e) < 0)
		snprintf(err, errlen, "%s", e.message);
	else if (!(j = json_loadb(body.buf, body.len, 0, &je)))
		snprintf(err, errlen, "the answer is not JSON: %s", je.text);
	else
		rc = kube_secret_decode(j, out, err, errlen);
	if (j) {
		wipe_tree(j);
		json_decref(j);
	}
	if (body.alloc)
		explicit_bzero(body.buf, body.alloc);
	strbuf_release(&body);
	strbuf_release(&path);
	return rc;
}
