/*
 * bench_util: what the benchmarks that run components share: starting one with its output in a
 * log, stopping it, waiting for its socket or file, reading its memory and CPU from /proc, and
 * the load generator's pieces (a parallel loop, create-or-die, die).
 */
#ifndef KCSI_BENCH_UTIL_H
#define KCSI_BENCH_UTIL_H

#include <jansson.h>

#include <stdbool.h>
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

#endif
