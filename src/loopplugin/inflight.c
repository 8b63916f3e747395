/*
 * inflight: a mutex and a small array of keys. The number of operations running at once is
 * bounded by the server's threads, so a linear scan is the fastest structure here.
 */
#include "loopplugin/inflight.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

struct lp_inflight {
	pthread_mutex_t mu;
	char **keys;
	size_t len, alloc;
};

struct lp_inflight *lp_inflight_new(void)
{
	struct lp_inflight *f = xcalloc(1, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	return f;
}

void lp_inflight_free(struct lp_inflight *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->len; i++)
		free(f->keys[i]);
	free(f->keys);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

bool lp_inflight_begin(struct lp_inflight *f, const char *key)
{
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->len; i++) {
		if (strcmp(f->keys[i], key) == 0) {
			pthread_mutex_unlock(&f->mu);
			return false;
		}
	}
	if (f->len == f->alloc) {
		f->alloc = f->alloc ? 2 * f->alloc : 16;
		f->keys = xrealloc(f->keys, f->alloc * sizeof(*f->keys));
	}
	f->keys[f->len++] = xstrdup(key);
	pthread_mutex_unlock(&f->mu);
	return true;
}

void lp_inflight_end(struct lp_inflight *f, const char *key)
{
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->len; i++) {
		if (strcmp(f->keys[i], key) == 0) {
			free(f->keys[i]);
			f->keys[i] = f->keys[--f->len];
			break;
		}
	}
	pthread_mutex_unlock(&f->mu);
}
