/*
 * kube/hmap, the string map under the work queues, stores and caches: every key findable after
 * random puts and deletes (checked against a plain array), and a map a burst grew shrinking
 * back when emptied, its remaining entries intact.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kube/hmap.h"

static void test_random_against_array(void)
{
	enum { K = 2000 };
	static bool in[K];
	struct kube_hmap m = KUBE_HMAP_INIT;
	unsigned seed = 7;
	char key[16];
	size_t n = 0;

	for (int step = 0; step < 200000; step++) {
		int k = rand_r(&seed) % K;
		snprintf(key, sizeof(key), "k%d", k);
		if (rand_r(&seed) % 3) {
			kube_hmap_put(&m, key, (void *)(uintptr_t)(k + 1));
			n += !in[k];
			in[k] = true;
		} else {
			void *v = kube_hmap_del(&m, key);
			CHECK(v == (in[k] ? (void *)(uintptr_t)(k + 1) : NULL));
			n -= in[k];
			in[k] = false;
		}
		if (step % 1000 == 0) { /* drain to a few now and then: the map shrinks and regrows */
			for (int i = 0; i < K - 5; i++)
				if (in[i]) {
					snprintf(key, sizeof(key), "k%d", i);
					kube_hmap_del(&m, key);
					in[i] = false;
					n--;
				}
		}
	}
	CHECK_INT(m.len, n);
	int wrong = 0;
	for (int k = 0; k < K; k++) {
		snprintf(key, sizeof(key), "k%d", k);
		wrong += kube_hmap_has(&m, key) != in[k];
		if (in[k])
			wrong += kube_hmap_get(&m, key) != (void *)(uintptr_t)(k + 1);
	}
	CHECK_INT(wrong, 0);
	kube_hmap_clear(&m);
}

static void test_shrinks_after_burst(void)
{
	struct kube_hmap m = KUBE_HMAP_INIT;
	char key[16];
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		kube_hmap_put(&m, key, (void *)(uintptr_t)(i + 1));
	}
	CHECK(m.cap >= 16384);
	for (int i = 0; i < 10000; i++)
		if (i % 1000) {
			snprintf(key, sizeof(key), "key-%d", i);
			kube_hmap_del(&m, key);
		}
	CHECK_INT(m.len, 10);
	CHECK(m.cap <= 64); /* 16,384 slots of 24 bytes were 384 KiB */
	for (int i = 0; i < 10000; i += 1000) {
		snprintf(key, sizeof(key), "key-%d", i);
		CHECK(kube_hmap_get(&m, key) == (void *)(uintptr_t)(i + 1));
	}
	kube_hmap_clear(&m);
}

int main(void)
{
	RUN(test_random_against_array);
	RUN(test_shrinks_after_burst);
	return CHECK_DONE();
}
