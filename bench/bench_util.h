/*
 * bench_util: what the benchmarks that run components share: starting one with its output in a
 * log, stopping it, waiting for its socket or file, reading its memory and CPU from /proc, and
 * the load generator's pieces (a parallel loop, create-or-die, die).
 *
 * A benchmark isolates the component under test only when the emulator, the driver and the load
 * generator are not the bottleneck, so every component benchmark accounts for the CPU of a run
 * (struct bench_cpu: each process's seconds and share, the load generator's own, and what the
 * rest of the machine used) and samples the component's memory (struct bench_mem).
 */
#ifndef KCSI_BENCH_UTIL_H
#define KCSI_BENCH_UTIL_H

#include <jansson.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kube/client.h"

/* Starts argv[0] (a path) in its own process group, stdout and stderr appended to log; it gets
 * SIGKILL when the calling thread ends, so that a benchmark that dies leaves nothing running. */
pid_t bench_spawn(char *const argv[], const char *log);
/* SIGTERM, then waits for it; nothing for pid <= 0. */
void bench_stop(pid_t pid);
/* Waits until path is a socket (sock) or a non-empty file; false after timeout_ns. */
bool bench_wait_file(const char *path, bool sock, int64_t timeout_ns);
/* A "<key>: N kB" line of /proc/<pid>/status: VmRSS, or RssAnon (private memory, without the
 * shared library pages that RSS also counts). -1 when unreadable. */
long bench_status_kb(pid_t pid, const char *key);
/* User + system CPU seconds of pid; -1 when unreadable. */
double bench_cpu_s(pid_t pid);

/* Prints "<program>: <message>" to stderr and exits 1. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Runs fn(i) for every i in [0, n) on `threads` threads (at most 64). */
void bench_parallel(int n, void (*fn)(int i), int threads);
/* Creates obj (reference stolen), retrying up to 5 times; an existing object is fine. */
void bench_create_or_die(struct kube_client *c, const struct kube_resource *r, const char *ns,
			 json_t *obj);

/* The API server's current resourceVersion (a one-item LIST): every successful write bumps it,
 * so its difference over a run counts the writes of every process. Dies on an error. */
long long bench_current_rv(struct kube_client *c);
/* qsort comparator of int64_t values, ascending. */
int bench_cmp_i64(const void *a, const void *b);
/* True when a line of the file at path contains needle (a component's log line). */
bool bench_log_has(const char *path, const char *needle);

/* User + system CPU seconds of the children pid has waited for (mkfs, mount, ...); -1 when
 * unreadable. */
double bench_children_cpu_s(pid_t pid);

/* ---- CPU accounting of a run ----
 * bench_cpu_add() the processes to account for (the component first), bench_cpu_start() when
 * the measured part begins, bench_cpu_stop() when it ends; then the fields below hold the CPU
 * seconds used in between. `other_s` is the machine's busy time (/proc/stat: user, nice, system,
 * irq, softirq of all cores) minus the processes and the load generator: other programs, and
 * kernel work not charged to a process (loopback network softirqs, for example). */
#define BENCH_CPU_MAX 8
struct bench_cpu {
	int n;
	const char *name[BENCH_CPU_MAX]; /* borrowed, e.g. "csi-attacher" */
	pid_t pid[BENCH_CPU_MAX];
	bool children[BENCH_CPU_MAX]; /* the entry counts pid's waited-for children, not pid */
	double s[BENCH_CPU_MAX]; /* after stop: CPU seconds of each process during the run */
	double self_s;           /* the load generator (this process, every thread) */
	double busy_s, other_s;  /* the whole machine's busy CPU; the part of it nobody above used */
	double wall_s;
	int cores;
	/* start values (private) */
	double at0[BENCH_CPU_MAX], self0, busy0;
	int64_t t0;
};
void bench_cpu_add(struct bench_cpu *b, const char *name, pid_t pid);
/* An entry for the processes pid starts and waits for (mkfs.ext4, mount, ...). */
void bench_cpu_add_children(struct bench_cpu *b, const char *name, pid_t pid);
void bench_cpu_start(struct bench_cpu *b);
void bench_cpu_stop(struct bench_cpu *b);
/* After bench_cpu_stop: an entry the caller measured itself (the sum over many processes, for
 * example), s CPU seconds during the run; they are taken out of other_s. */
void bench_cpu_add_measured(struct bench_cpu *b, const char *name, double s);
/* Prints "CPU during <what>: <name> 1.23 s (40%), ..., load generator, other; machine busy"
 * on one line, shares of the machine's busy time. */
void bench_cpu_print(const struct bench_cpu *b, const char *what);
/* Appends " cpu_<key>_s=1.23 ..." for each process (keys[i], no spaces), load and other, for a
 * machine-readable line. */
void bench_cpu_kv(const struct bench_cpu *b, const char *const keys[], char *out, size_t len);

/* ---- memory sampling ----
 * A thread that reads VmRSS and RssAnon of pid every 20 ms between start and stop and keeps the
 * peaks (kB). */
struct bench_mem {
	pid_t pid;
	long peak_rss_kb, peak_anon_kb; /* read after bench_mem_stop() */
	/* private */
	_Atomic long rss, anon;
	_Atomic bool stop;
	pthread_t thread;
};
void bench_mem_start(struct bench_mem *m, pid_t pid);
void bench_mem_stop(struct bench_mem *m);

#endif
