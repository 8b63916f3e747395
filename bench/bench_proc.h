/*
 * bench_proc: the process helpers every benchmark that runs components shares (starting one
 * with its output in a log, stopping it, waiting for its socket or file, and reading its memory
 * and CPU from /proc).
 */
#ifndef KCSI_BENCH_PROC_H
#define KCSI_BENCH_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts argv[0] (a path) in its own process group, stdout and stderr appended to log. */
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

#endif
