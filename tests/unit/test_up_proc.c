/*
 * Unit tests for up/proc: kcsi up's supervisor restarts a child that exits with a doubling
 * back-off, gives it up after the limit of failures in a row while its siblings keep running,
 * and tells the caller when the child given up was a core one; a child's fatal exit status ends
 * the group at once; a restart the supervisor asks for counts no failure. Real children
 * (/bin/sh), real waits: about 4 s.
 */
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "check.h"
#include "up/proc.h"

static char dir[] = "/tmp/test_up_proc.XXXXXX";

static struct up_proc *add(struct up_procs *ps, const char *name, const char *script)
{
	char log[256];
	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	char *const argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	struct up_proc *p = up_procs_add(ps, name, log, argv);
	char err[256];
	CHECK(p != NULL);
	CHECK_INT(up_proc_start(p, err, sizeof(err)), 0);
	return p;
}

/* Reaps until p is given up or `seconds` pass; returns the lowest up_procs_reap() answer. */
static int reap_until_given_up(struct up_procs *ps, const struct up_proc *p, int seconds,
			       int64_t starts[], int *nstarts)
{
	int lowest = 0;
	int64_t deadline = mono_now_ns() + seconds * NSEC_PER_SEC, last = p->start_ns;
	starts[(*nstarts)++] = last;
	while (!p->given_up && mono_now_ns() < deadline) {
		int r = up_procs_reap(ps);
		lowest = r < lowest ? r : lowest;
		if (p->start_ns != last && *nstarts < 8)
			starts[(*nstarts)++] = last = p->start_ns;
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	return lowest;
}

static void test_crash_loop_is_given_up_and_siblings_run(void)
{
	struct up_procs ps = { .limit = 3 };
	struct up_proc *crasher = add(&ps, "crasher", "echo boom; exit 3");
	struct up_proc *steady = add(&ps, "steady", "exec sleep 30");
	int64_t starts[8];
	int n = 0;
	int lowest = reap_until_given_up(&ps, crasher, 10, starts, &n);
	CHECK(crasher->given_up);
	CHECK_INT(crasher->restarts, 3);
	CHECK_INT(n, 3); /* started, restarted twice, never again */
	CHECK_INT(crasher->pid, 0);
	CHECK(WIFEXITED(crasher->last_status) && WEXITSTATUS(crasher->last_status) == 3);
	CHECK(n == 3 && starts[1] - starts[0] >= NSEC_PER_SEC);     /* back-off 1 s ... */
	CHECK(n == 3 && starts[2] - starts[1] >= 2 * NSEC_PER_SEC); /* ... then 2 s */
	CHECK_INT(lowest, 0); /* not core: the caller is not told to stop */
	CHECK(steady->pid > 0 && kill(steady->pid, 0) == 0);
	/* given up for good: more reaping starts nothing */
	for (int i = 0; i < 20; i++) {
		up_procs_reap(&ps);
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	CHECK_INT(crasher->pid, 0);
	pid_t pid = steady->pid;
	up_procs_stop_all(&ps, NSEC_PER_SEC);
	CHECK_INT(steady->pid, 0);
	CHECK(kill(pid, 0) != 0);
	up_procs_release(&ps);
}

static void test_core_given_up_is_reported(void)
{
	struct up_procs ps = { .limit = 2 };
	struct up_proc *core = add(&ps, "apiserver", "exit 1");
	core->core = true;
	int64_t starts[8];
	int n = 0;
	CHECK_INT(reap_until_given_up(&ps, core, 5, starts, &n), -1);
	CHECK(core->given_up);
	up_procs_stop_all(&ps, NSEC_PER_SEC);
	up_procs_release(&ps);
}

static void test_no_limit_restarts_forever(void)
{
	struct up_procs ps = { .limit = 0 };
	struct up_proc *p = add(&ps, "kubelet-way", "exit 2");
	int64_t deadline = mono_now_ns() + 1500 * NSEC_PER_MSEC;
	while (mono_now_ns() < deadline) {
		up_procs_reap(&ps);
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	CHECK(!p->given_up);
	CHECK(p->restarts >= 1 && (p->pid > 0 || p->restart_at > 0)); /* running or due again */
	up_procs_stop_all(&ps, NSEC_PER_SEC);
	up_procs_release(&ps);
}

/*
 * A fatal exit status (kube-emulator's "address in use") ends the group at once, without the
 * back-off or the limit; another status of the same child is an ordinary restart. A restart the
 * supervisor asks for (up_proc_restart) counts no failure, and the new argv is used.
 */
static void test_fatal_exit_and_restart(void)
{
	struct up_procs ps = { .limit = 0 };
	struct up_proc *p = add(&ps, "emu", "exit 3");
	p->fatal_exit = 3;
	snprintf(p->fatal_why, sizeof(p->fatal_why), "the test's reason");
	int64_t starts[8];
	int n = 0;
	CHECK_INT(reap_until_given_up(&ps, p, 5, starts, &n), -1);
	CHECK(p->given_up);
	CHECK_INT(p->restart_at, 0);

	struct up_proc *q = add(&ps, "agent", "exec sleep 30");
	q->fatal_exit = 3;
	CHECK_INT(up_proc_set_arg(q, "-c", "exec sleep 20"), 0);
	CHECK_INT(up_proc_set_arg(q, "--nope", "x"), -1);
	pid_t old = q->pid;
	char err[256];
	CHECK_INT(up_proc_restart(q, NSEC_PER_SEC, err, sizeof(err)), 0);
	CHECK(q->pid > 0 && q->pid != old);
	CHECK_INT(q->restarts, 0);
	CHECK(!strcmp(q->argv[2], "exec sleep 20"));
	CHECK(WIFSIGNALED(q->last_status) && WTERMSIG(q->last_status) == SIGTERM);
	kill(q->pid, SIGKILL); /* a crash, not the fatal status: restarted as usual */
	int64_t deadline = mono_now_ns() + 3 * NSEC_PER_SEC;
	int r = 0;
	while (q->restarts == 0 && mono_now_ns() < deadline) {
		r = up_procs_reap(&ps);
		sleep_ns(10 * NSEC_PER_MSEC);
	}
	CHECK_INT(r, 1);
	CHECK(!q->given_up && q->restart_at > 0);
	up_procs_stop_all(&ps, NSEC_PER_SEC);
	up_procs_release(&ps);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(test_crash_loop_is_given_up_and_siblings_run);
	RUN(test_core_given_up_is_reported);
	RUN(test_no_limit_restarts_forever);
	RUN(test_fatal_exit_and_restart);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return CHECK_DONE();
}
