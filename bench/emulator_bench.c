/*
 * emulator_bench: figures for kube-emulator. Not a test: it prints numbers and never fails on time.
 *
 *   1. creates/s: 16 client threads (one keep-alive libcurl connection each) create 10,000
 *      PersistentVolumes;
 *   2. patches/s: the same 16 clients merge-patch a label on every PersistentVolume;
 *   3. watch delivery latency: 100 concurrent watchers on VolumeAttachments while one writer
 *      creates VolumeAttachments at a steady pace; each object carries its send time (monotonic
 *      clock, shared by both processes on this machine) and every watcher records arrival - send;
 *   4. the rest of 10,000 VolumeAttachments are created by 16 clients, then the emulator's RSS
 *      is read from /proc with 10,000 PVs and 10,000 VAs stored.
 *
 * Usage: emulator_bench [path/to/kube-emulator]   (default: next to this binary, ../bin)
 *        EMULATOR_BENCH_STATE_FILE=1 emulator_bench   the same with --state-file (its log)
 */
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLIENTS 16
#define OBJECTS 10000
#define WATCHERS 100
#define WATCHED_EVENTS 2000
#define EVENT_RATE 500 /* per second, for the latency phase */

static char server[256];

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

struct client {
	CURL *c;
	struct curl_slist *hdr_json, *hdr_merge;
	long errors;
};

static void client_init(struct client *cl)
{
	cl->c = curl_easy_init();
	cl->hdr_json = curl_slist_append(NULL, "Content-Type: application/json");
	cl->hdr_merge = curl_slist_append(NULL, "Content-Type: application/merge-patch+json");
	curl_easy_setopt(cl->c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(cl->c, CURLOPT_NOSIGNAL, 1L);
	cl->errors = 0;
}

static void client_free(struct client *cl)
{
	curl_slist_free_all(cl->hdr_json);
	curl_slist_free_all(cl->hdr_merge);
	curl_easy_cleanup(cl->c);
}

static void client_do(struct client *cl, const char *method, const char *path, const char *body,
		      bool merge, long want)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", server, path);
	curl_easy_setopt(cl->c, CURLOPT_URL, url);
	curl_easy_setopt(cl->c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(cl->c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(cl->c, CURLOPT_HTTPHEADER, merge ? cl->hdr_merge : cl->hdr_json);
	long code = 0;
	if (curl_easy_perform(cl->c) != CURLE_OK ||
	    curl_easy_getinfo(cl->c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != want)
		cl->errors++;
}

/* ---- phase 1, 2, 4: parallel writers ---- */

enum job { JOB_CREATE_PV, JOB_PATCH_PV, JOB_CREATE_VA };

struct writer {
	pthread_t t;
	enum job job;
	int from, to;
	long errors;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct client cl;
	client_init(&cl);
	char body[1024], path[256];
	for (int i = w->from; i < w->to; i++) {
		switch (w->job) {
		case JOB_CREATE_PV:
			snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"pv-%05d\",\"labels\":"
				 "{\"bench\":\"yes\"}},\"spec\":{\"capacity\":{\"storage\":\"1Gi\"},"
				 "\"accessModes\":[\"ReadWriteOnce\"],\"persistentVolumeReclaimPolicy\":"
				 "\"Delete\",\"storageClassName\":\"loop\",\"csi\":{\"driver\":"
				 "\"loop.kcsi.io\",\"volumeHandle\":\"vol-%05d\",\"fsType\":\"ext4\"}}}",
				 i, i);
			client_do(&cl, "POST", "/api/v1/persistentvolumes", body, false, 201);
			break;
		case JOB_PATCH_PV:
			snprintf(path, sizeof(path), "/api/v1/persistentvolumes/pv-%05d", i);
			client_do(&cl, "PATCH", path, "{\"metadata\":{\"labels\":{\"patched\":\"yes\"}}}",
				  true, 200);
			break;
		case JOB_CREATE_VA:
			snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"va-%05d\"},\"spec\":"
				 "{\"attacher\":\"loop.kcsi.io\",\"nodeName\":\"node-%d\",\"source\":"
				 "{\"persistentVolumeName\":\"pv-%05d\"}}}", i, i % 10, i);
			client_do(&cl, "POST", "/apis/storage.k8s.io/v1/volumeattachments", body, false,
				  201);
			break;
		}
	}
	w->errors = cl.errors;
	client_free(&cl);
	return NULL;
}

static double run_writers(enum job job, int from, int to, long *errors)
{
	struct writer w[CLIENTS];
	int per = (to - from + CLIENTS - 1) / CLIENTS;
	int64_t start = now_ns();
	for (int i = 0; i < CLIENTS; i++) {
		w[i].job = job;
		w[i].from = from + i * per;
		w[i].to = w[i].from + per > to ? to : w[i].from + per;
		pthread_create(&w[i].t, NULL, writer_main, &w[i]);
	}
	*errors = 0;
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(w[i].t, NULL);
		*errors += w[i].errors;
	}
	return (double)(to - from) / ((double)(now_ns() - start) / 1e9);
}

/* ---- phase 3: watch latency ---- */

struct watcher {
	pthread_t t;
	char line[8192];
	size_t len;
	int64_t *lat;
	int n;

};

static int watchers_stop;

static void watcher_line(struct watcher *w)
{
	static const char key[] = "\"bench/sent-ns\":\"";
	w->line[w->len] = '\0';
	if (!strstr(w->line, "\"type\":\"ADDED\""))
		return;
	char *p = strstr(w->line, key);
	int n = __atomic_load_n(&w->n, __ATOMIC_RELAXED);
	if (p && n < WATCHED_EVENTS) {
		w->lat[n] = now_ns() - strtoll(p + sizeof(key) - 1, NULL, 10);
		__atomic_store_n(&w->n, n + 1, __ATOMIC_RELEASE); /* the main thread polls it */
	}
}

static size_t watcher_data(char *p, size_t s, size_t n, void *u)
{
	struct watcher *w = u;
	for (size_t i = 0; i < s * n; i++) {
		if (p[i] == '\n') {
			watcher_line(w);
			w->len = 0;
		} else if (w->len < sizeof(w->line) - 1) {
			w->line[w->len++] = p[i];
		}
	}
	return s * n;
}

static int watcher_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct watcher *w = u;
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return __atomic_load_n(&watchers_stop, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&w->n, __ATOMIC_RELAXED) >= WATCHED_EVENTS;
}

static void *watcher_main(void *arg)
{
	struct watcher *w = arg;
	char url[512];
	snprintf(url, sizeof(url), "%s/apis/storage.k8s.io/v1/volumeattachments?watch=1&"
		 "allowWatchBookmarks=true&timeoutSeconds=120", server);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watcher_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, watcher_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_perform(c);
	curl_easy_cleanup(c);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void watch_phase(void)
{
	static struct watcher w[WATCHERS];
	for (int i = 0; i < WATCHERS; i++) {
		w[i].lat = calloc(WATCHED_EVENTS, sizeof(int64_t));
		pthread_create(&w[i].t, NULL, watcher_main, &w[i]);
	}
	/* a watch with rv "" starts with the (empty) initial state; wait until all are connected */
	struct client cl;
	client_init(&cl);
	usleep(500 * 1000);
	char body[512];
	int64_t start = now_ns(), period = 1000000000LL / EVENT_RATE;
	for (int i = 0; i < WATCHED_EVENTS; i++) {
		int64_t due = start + i * period;
		while (now_ns() < due)
			usleep(50);
		snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"va-%05d\",\"annotations\":"
			 "{\"bench/sent-ns\":\"%lld\"}},\"spec\":{\"attacher\":\"loop.kcsi.io\","
			 "\"nodeName\":\"node-%d\",\"source\":{\"persistentVolumeName\":\"pv-%05d\"}}}",
			 i, (long long)now_ns(), i % 10, i);
		client_do(&cl, "POST", "/apis/storage.k8s.io/v1/volumeattachments", body, false, 201);
	}
	int64_t deadline = now_ns() + 30 * 1000000000LL;
	for (;;) {
		int done = 0;
		for (int i = 0; i < WATCHERS; i++)
			done += __atomic_load_n(&w[i].n, __ATOMIC_ACQUIRE) >= WATCHED_EVENTS;
		if (done == WATCHERS || now_ns() > deadline)
			break;
		usleep(10 * 1000);
	}
	__atomic_store_n(&watchers_stop, 1, __ATOMIC_RELAXED);
	size_t total = 0;
	for (int i = 0; i < WATCHERS; i++) {
		pthread_join(w[i].t, NULL);
		total += (size_t)w[i].n;
	}
	int64_t *all = malloc((total + 1) * sizeof(int64_t));
	size_t k = 0;
	for (int i = 0; i < WATCHERS; i++) {
		memcpy(all + k, w[i].lat, (size_t)w[i].n * sizeof(int64_t));
		k += (size_t)w[i].n;
		free(w[i].lat);
	}
	qsort(all, total, sizeof(int64_t), cmp64);
	printf("watch delivery (%d watchers, %d events at %d/s): %zu of %d deliveries, "
	       "p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", WATCHERS, WATCHED_EVENTS, EVENT_RATE,
	       total, WATCHERS * WATCHED_EVENTS, total ? all[total / 2] / 1e6 : 0,
	       total ? all[total * 99 / 100] / 1e6 : 0, total ? all[total - 1] / 1e6 : 0);
	if (cl.errors)
		printf("  (%ld writer errors)\n", cl.errors);
	free(all);
	client_free(&cl);
}

/* ---- emulator process ---- */

static pid_t start_emulator(const char *bin, const char *dir)
{
	char kc[PATH_MAX];
	snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
	pid_t pid = fork();
	if (pid == 0) {
		/* EMULATOR_BENCH_STATE_FILE=1: with a state file, whose log costs one write() per
		 * commit (docs/kube-emulator.md, "State file") */
		char state[PATH_MAX + 16];
		snprintf(state, sizeof(state), "%s/state.json", dir);
		const char *with = getenv("EMULATOR_BENCH_STATE_FILE");
		if (with && *with == '1')
			execl(bin, bin, "--listen", "127.0.0.1:0", "--write-kubeconfig", kc,
			      "--watch-history", "10000", "--state-file", state, (char *)NULL);
		else
			execl(bin, bin, "--listen", "127.0.0.1:0", "--write-kubeconfig", kc,
			      "--watch-history", "10000", (char *)NULL);
		perror(bin);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(kc, "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f)) {
			if (sscanf(line, " server: %255s", server) == 1) {
				fclose(f);
				return pid;
			}
		}
		if (f)
			fclose(f);
		usleep(50 * 1000);
	}
	fprintf(stderr, "kube-emulator did not write %s\n", kc);
	kill(pid, SIGTERM);
	return -1;
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	char bin[PATH_MAX], dir[] = "/tmp/emulator-bench.XXXXXX";
	if (argc > 1) {
		snprintf(bin, sizeof(bin), "%s", argv[1]);
	} else {
		ssize_t n = readlink("/proc/self/exe", bin, sizeof(bin) - 32);
		bin[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(bin, '/');
		snprintf(slash ? slash + 1 : bin, 32, "kube-emulator");
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	curl_global_init(CURL_GLOBAL_ALL);
	pid_t pid = start_emulator(bin, dir);
	if (pid < 0)
		return 1;
	long errors;
	long rss0 = rss_kib(pid);
	double r = run_writers(JOB_CREATE_PV, 0, OBJECTS, &errors);
	printf("creates: %d PersistentVolumes, %d clients: %.0f creates/s (%ld errors)\n", OBJECTS,
	       CLIENTS, r, errors);
	r = run_writers(JOB_PATCH_PV, 0, OBJECTS, &errors);
	printf("patches: %d merge patches, %d clients: %.0f patches/s (%ld errors)\n", OBJECTS,
	       CLIENTS, r, errors);
	watch_phase();
	r = run_writers(JOB_CREATE_VA, WATCHED_EVENTS, OBJECTS, &errors);
	printf("creates: %d VolumeAttachments, %d clients: %.0f creates/s (%ld errors)\n",
	       OBJECTS - WATCHED_EVENTS, CLIENTS, r, errors);
	long rss = rss_kib(pid);
	printf("RSS: %.1f MiB with %d PVs + %d VAs stored (%.1f MiB at start; history %d events)\n",
	       rss / 1024.0, OBJECTS, OBJECTS, rss0 / 1024.0, 10000);
	kill(pid, SIGTERM);
	int status;
	waitpid(pid, &status, 0);
	char kc[PATH_MAX];
	snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
	unlink(kc);
	rmdir(dir);
	curl_global_cleanup();
	return 0;
}
