/*
 * up proc: a tiny supervisor of child processes, the role a kubelet plays for a pod's containers
 * with restartPolicy Always.
 *
 * Each child runs in its own process group, with stdout and stderr appended to its log file and
 * PR_SET_PDEATHSIG set to SIGTERM, so a supervisor killed with SIGKILL still takes its children
 * down. A child that exits while the group runs is reported (status and the tail of its log) and
 * started again after a back-off that doubles from 1 s to 30 s. A child that failed `limit` times
 * in a row (a run of a minute or more clears the count) is given up: reported once more, with
 * why, and never started again, while the others keep running. Giving up a core child (one the
 * whole group needs, up_proc.core) is the caller's to act on: up_procs_reap() says so.
 *
 * Life cycle: up_procs_add() for each child, up_proc_start() each, up_procs_reap() from the main
 * loop, up_procs_stop_all() at the end (SIGTERM in the reverse order of adding, SIGKILL after the
 * grace period). All functions run on one thread.
 */
#ifndef KCSI_UP_PROC_H
#define KCSI_UP_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define UP_MAX_PROCS 96 /* 16 nodes: 6 + 16 * 4 processes; more nodes run as 3 (up/fleet.h) */

struct up_proc {
	char name[64];       /* "csi-attacher", "kcsi-node/node-1" */
	char **argv;         /* owned, NULL-terminated; argv[0] is an absolute path */
	char log_path[4096];
	pid_t pid;           /* 0 when not running */
	int restarts;        /* failures in a row: exits after runs shorter than a minute */
	int last_status;     /* wait status of the last exit */
	bool core;           /* the group cannot work without it: giving it up ends the group */
	bool given_up;       /* failed `limit` times in a row; never started again */
	int64_t start_ns;    /* monotonic time of the last start */
	int64_t restart_at;  /* monotonic time of the next start; 0 when none is due */
	int tier;            /* stop order: higher tiers stop first (clients before their servers) */
	char env[128];       /* "NAME=value" added to the child's environment, or "" */
	int fatal_exit;      /* an exit status that ends the group at once (0: none)... */
	char fatal_why[512]; /* ...and why, for the report */
};

/*
 * Stop tiers: clients of the API server and of the drivers first, then the drivers, then the
 * API server, so nobody spends its last second reconnecting to a server that is already gone.
 */
enum { TIER_APISERVER, TIER_DRIVER, TIER_CLIENT };

struct up_procs {
	struct up_proc p[UP_MAX_PROCS];
	int n;
	int limit; /* failures in a row before a child is given up; 0: never (a kubelet's way) */
};

/* Adds a child (not started); argv is copied. Returns it, or NULL when the table is full. */
struct up_proc *up_procs_add(struct up_procs *ps, const char *name, const char *log_path,
			     char *const argv[]);
/* Starts (or restarts) a child. Returns 0, or -1 with a reason in err. */
int up_proc_start(struct up_proc *p, char *err, size_t errlen);
/*
 * Collects exited children, reports each with the tail of its log on stderr, schedules their
 * restart (or gives them up, see above) and starts the ones whose back-off has passed. Returns
 * how many exited, or -1 when a core child was given up, or a child exited with its fatal_exit
 * status (reported, with its fatal_why; the child is then given up at once).
 */
int up_procs_reap(struct up_procs *ps);
/*
 * Stops the children tier by tier, highest first: SIGTERM to every running child of the tier,
 * SIGKILL to those still alive after grace_ns, then the next tier.
 */
void up_procs_stop_all(struct up_procs *ps, int64_t grace_ns);
/*
 * Restarts a running child now (SIGTERM, SIGKILL after grace_ns, start again) without counting
 * a failure: a restart the supervisor wants, not a crash. 0, or -1 with a reason in err.
 */
int up_proc_restart(struct up_proc *p, int64_t grace_ns, char *err, size_t errlen);
/* Replaces the value that follows flag in the child's argv (used from its next start on);
 * -1 when the flag is not there. */
int up_proc_set_arg(struct up_proc *p, const char *flag, const char *value);
/* Frees the argv copies. */
void up_procs_release(struct up_procs *ps);
/* Prints the last `lines` lines of a file to stderr, each indented. */
void up_print_tail(const char *path, int lines);

/* What starting the children needs: a directory and its parents (0755; 0, or -1 with errno),
 * and a TCP port on 127.0.0.1 that was free a moment ago (or -1). */
int up_mkdirs(const char *path);
int up_free_port(void);
/* GET http://127.0.0.1:port/path (300 ms at most); the HTTP status, or -1 when nothing answers. */
int up_http_status(int port, const char *path);

#endif
