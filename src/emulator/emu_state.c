/*
 * emu_state: the state file, its log and its lock (the design and why: emu_state.h).
 *
 * The snapshot is one JSON document read with jansson at start; the log is read whole and cut
 * into lines, each decoded on its own. Folding (save_locked) holds the store lock from reading
 * the objects to emptying the log, so no commit can land between the snapshot and the truncation
 * and be lost; it runs at start and exit, and while running once per EMU_STATE_COMPACT_MIN or
 * more bytes of log.
 */
#include "emulator/emu_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/lockfile.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "emulator/emu_patch.h"

/* ---- writing ---- */

static int write_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

/* The threshold after a snapshot of `bytes`: four times it, EMU_STATE_COMPACT_MIN at least. */
static uint64_t compact_threshold(uint64_t bytes)
{
	return bytes * 4 > EMU_STATE_COMPACT_MIN ? bytes * 4 : EMU_STATE_COMPACT_MIN;
}

/* Snapshot to P (temporary file, fsync, rename), then the log emptied. Caller holds st->mu. */
static int save_locked(struct emu_store *st, char *err, size_t errlen)
{
	json_t *objs = json_array();
	for (size_t i = 0; i < st->nres; i++)
		for (size_t j = 0; j < st->res[i].n; j++)
			json_array_append(objs, st->res[i].items[j].obj);
	json_t *doc = json_pack("{s:s, s:I, s:o}", "kind", "KubeEmulatorState", "resourceVersion",
				(json_int_t)st->rv, "objects", objs);
	char *text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	size_t len = text ? strlen(text) : 0;

	struct strbuf tmp = STRBUF_INIT;
	strbuf_addf(&tmp, "%s.tmp.%d", st->state_path, (int)getpid());
	int rc = -1;
	int fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!text)
		snprintf(err, errlen, "cannot serialize the store for %s", st->state_path);
	else if (fd < 0)
		snprintf(err, errlen, "cannot create %s: %s", tmp.buf, strerror(errno));
	else if (write_all(fd, text, len) < 0 || fsync(fd) < 0)
		snprintf(err, errlen, "cannot write %s: %s", tmp.buf, strerror(errno));
	else if (rename(tmp.buf, st->state_path) < 0)
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp.buf, st->state_path,
			 strerror(errno));
	else
		rc = 0;
	if (fd >= 0)
		close(fd);
	if (rc < 0 && fd >= 0)
		unlink(tmp.buf);
	strbuf_release(&tmp);
	free(text);
	if (rc < 0)
		return -1;
	/* Every line of the log is in the snapshot now; a crash before this truncation only makes
	 * the next start skip them (rv <= the snapshot's). */
	if (st->log_fd >= 0) {
		if (ftruncate(st->log_fd, 0) < 0) {
			snprintf(err, errlen, "cannot empty %s: %s", st->log_path, strerror(errno));
			return -1;
		}
		st->log_bytes = 0;
	}
	st->log_compact_at = compact_threshold(len);
	return 0;
}

int emu_state_save(struct emu_store *st, char *err, size_t errlen)
{
	pthread_mutex_lock(&st->mu);
	int rc = save_locked(st, err, errlen);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Stops logging after a failure: the lines so far stay valid, the rest waits for the exit's save. */
static void log_off(struct emu_store *st, const char *why)
{
	KLOG_ERR(why, "Cannot append to the state file's log; the state is saved only at exit "
		 "from now on log=\"%s\"", st->log_path);
	close(st->log_fd);
	st->log_fd = -1;
	st->on_commit = NULL;
}

void emu_state_append(struct emu_store *st, const struct emu_event *ev, const char *key)
{
	const struct emu_resource *r = &st->res[ev->res];
	struct strbuf head;
	strbuf_init(&head, 160);
	strbuf_addf(&head, "{\"rv\":%llu,\"type\":\"%s\",\"resource\":\"%s/%s\",\"key\":",
		    (unsigned long long)ev->rv, emu_event_names[ev->type], r->api_version, r->plural);
	strbuf_addjson(&head, key, strlen(key));
	strbuf_addstr(&head, ",\"object\":");
	/* the event's text as it is, not copied: one writev() per commit */
	struct iovec iov[3] = { { head.buf, head.len }, { ev->text, strlen(ev->text) },
				{ (char *)"}\n", 2 } };
	size_t len = iov[0].iov_len + iov[1].iov_len + 2;
	ssize_t n;
	do
		n = writev(st->log_fd, iov, 3);
	while (n < 0 && errno == EINTR);
	strbuf_release(&head);
	if (n == (ssize_t)len) {
		st->log_bytes += len;
	} else {
		/* A partial line (a full disk) must not stay in front of later ones: cut it off,
		 * then stop logging. */
		const char *why = n < 0 ? strerror(errno) : "short write (disk full?)";
		if (n > 0 && ftruncate(st->log_fd, (off_t)st->log_bytes) < 0)
			KLOG_ERR(strerror(errno), "Cannot cut a partial line off log=\"%s\"",
				 st->log_path);
		log_off(st, why);
	}
	if (st->log_fd >= 0 && st->log_bytes > st->log_compact_at) {
		char err[512];
		if (save_locked(st, err, sizeof(err)) < 0)
			log_off(st, err);
		else
			KLOG_V(2, "Folded the log into the state file=\"%s\" resourceVersion=%llu",
			       st->state_path, (unsigned long long)st->rv);
	}
}

/* ---- reading ---- */

/* Reads a whole file; NULL with errno (ENOENT for a missing one). */
static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			strbuf_release(&sb);
			errno = e;
			return NULL;
		}
		strbuf_add(&sb, buf, (size_t)n);
	}
	close(fd);
	return strbuf_detach(&sb, len);
}

/* The resource and key of a stored object, from its apiVersion, kind and metadata. */
static int object_place(struct emu_store *st, json_t *obj, char *key, size_t keylen)
{
	const char *av = json_string_value(json_object_get(obj, "apiVersion"));
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	json_t *meta = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const char *ns = json_string_value(json_object_get(meta, "namespace"));
	int res = av && kind ? emu_store_resource_by_kind(st, av, kind) : -1;
	if (res < 0 || !name || (st->res[res].namespaced && !ns))
		return -1;
	emu_store_key(&st->res[res], ns, name, key, keylen);
	return res;
}

/* The snapshot: objects into the empty store, its resourceVersion. A missing file is empty. */
static int load_snapshot(struct emu_store *st, const char *path, size_t *bytes, char *err,
			 size_t errlen)
{
	struct stat sb;
	if (stat(path, &sb) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "state file %s: %s", path, strerror(errno));
		return -1;
	}
	*bytes = (size_t)sb.st_size;
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	if (!doc) {
		snprintf(err, errlen, "state file %s: %s at line %d", path, jerr.text, jerr.line);
		return -1;
	}
	json_t *rv = json_object_get(doc, "resourceVersion");
	json_t *objs = json_object_get(doc, "objects");
	int rc = 0;
	if (!json_is_integer(rv) || json_integer_value(rv) < 0 || !json_is_array(objs)) {
		snprintf(err, errlen, "state file %s: expected {\"resourceVersion\": N, \"objects\": "
			 "[...]}", path);
		rc = -1;
	}
	size_t i;
	json_t *o;
	char key[600];
	json_array_foreach(objs, i, o) {
		if (rc < 0)
			break;
		if (!json_is_object(o) || emu_json_too_deep(o, EMU_MAX_JSON_DEPTH)) {
			snprintf(err, errlen, "state file %s: object %zu is not a JSON object of at "
				 "most %d levels", path, i, EMU_MAX_JSON_DEPTH);
			rc = -1;
			break;
		}
		int res = object_place(st, o, key, sizeof(key));
		if (res < 0) {
			const char *av = json_string_value(json_object_get(o, "apiVersion"));
			const char *kind = json_string_value(json_object_get(o, "kind"));
			const char *name = json_string_value(json_object_get(json_object_get(o, "metadata"),
									     "name"));
			snprintf(err, errlen, "state file %s: object of kind %s/%s named %s is not one "
				 "this emulator serves", path, av ? av : "?", kind ? kind : "?",
				 name ? name : "?");
			rc = -1;
			break;
		}
		emu_store_restore(st, res, key, json_incref(o), false);
	}
	if (rc == 0)
		st->rv = (uint64_t)json_integer_value(rv);
	json_decref(doc);
	return rc;
}

/* One log line applied; -1 when it is not a record this emulator can apply. */
static int replay_line(struct emu_store *st, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *rec = json_loadb(line, len, 0, &jerr);
	if (!rec)
		return -1;
	json_t *jrv = json_object_get(rec, "rv");
	const char *type = json_string_value(json_object_get(rec, "type"));
	const char *resource = json_string_value(json_object_get(rec, "resource"));
	const char *key = json_string_value(json_object_get(rec, "key"));
	json_t *obj = json_object_get(rec, "object");
	int res = -1;
	const char *slash = resource ? strrchr(resource, '/') : NULL;
	for (size_t i = 0; slash && i < st->nres; i++)
		if (!strcmp(st->res[i].plural, slash + 1) &&
		    strlen(st->res[i].api_version) == (size_t)(slash - resource) &&
		    !strncmp(st->res[i].api_version, resource, (size_t)(slash - resource)))
			res = (int)i;
	int rc = -1;
	if (json_is_integer(jrv) && json_integer_value(jrv) > 0 && type && key && res >= 0 &&
	    json_is_object(obj) && !emu_json_too_deep(obj, EMU_MAX_JSON_DEPTH) &&
	    (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") || !strcmp(type, "DELETED"))) {
		uint64_t rv = (uint64_t)json_integer_value(jrv);
		rc = 0;
		if (rv > st->rv) { /* older lines are in the snapshot already */
			emu_store_restore(st, res, key, json_incref(obj), !strcmp(type, "DELETED"));
			st->rv = rv;
		}
	}
	json_decref(rec);
	return rc;
}

/*
 * Replays the log over the snapshot. *records: the lines applied or skipped; *torn: a last line
 * cut short was dropped. -1 with err for a bad line that is not the last.
 */
static int replay_log(struct emu_store *st, const char *path, size_t *records, bool *torn,
		      char *err, size_t errlen)
{
	size_t len;
	char *text = slurp(path, &len);
	if (!text) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	size_t lineno = 0;
	for (size_t off = 0; off < len && rc == 0;) {
		char *nl = memchr(text + off, '\n', len - off);
		size_t end = nl ? (size_t)(nl - text) : len;
		lineno++;
		if (replay_line(st, text + off, end - off) == 0 && nl) {
			(*records)++;
		} else if (!nl || end + 1 == len) {
			*torn = true; /* the last line: its writer died inside write() */
		} else {
			snprintf(err, errlen, "state file log %s: line %zu is not a record (the file "
				 "is damaged; remove it to start from %s alone)", path, lineno,
				 st->state_path);
			rc = -1;
		}
		off = end + 1;
	}
	free(text);
	return rc;
}

static int take_lock(struct emu_store *st, char *err, size_t errlen)
{
	struct strbuf lock = STRBUF_INIT;
	strbuf_addf(&lock, "%s.lock", st->state_path);
	pid_t holder = 0;
	st->state_lock_fd = lockfile_take(lock.buf, &holder);
	if (st->state_lock_fd == LOCKFILE_BUSY) {
		if (holder > 0)
			snprintf(err, errlen, "state file %s is in use by another kube-emulator (pid "
				 "%d, lock %s)", st->state_path, (int)holder, lock.buf);
		else
			snprintf(err, errlen, "state file %s is in use by another kube-emulator (lock "
				 "%s)", st->state_path, lock.buf);
	} else if (st->state_lock_fd < 0) {
		snprintf(err, errlen, "state file lock %s: %s", lock.buf, strerror(errno));
	}
	strbuf_release(&lock);
	if (st->state_lock_fd < 0) {
		st->state_lock_fd = -1;
		return -1;
	}
	return 0;
}

int emu_state_open(struct emu_store *st, const char *path, char *err, size_t errlen)
{
	st->state_path = xstrdup(path);
	struct strbuf lp = STRBUF_INIT;
	strbuf_addf(&lp, "%s.log", path);
	st->log_path = strbuf_detach(&lp, NULL);
	size_t snap_bytes = 0, records = 0;
	bool torn = false;
	if (take_lock(st, err, errlen) < 0 || load_snapshot(st, path, &snap_bytes, err, errlen) < 0 ||
	    replay_log(st, st->log_path, &records, &torn, err, errlen) < 0)
		return -1;
	st->history_start = st->rv; /* nothing before the restart can be resumed */
	st->log_fd = open(st->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (st->log_fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", st->log_path, strerror(errno));
		return -1;
	}
	st->on_commit = emu_state_append;
	struct stat sb;
	st->log_bytes = fstat(st->log_fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
	st->log_compact_at = compact_threshold(snap_bytes);
	if (torn)
		KLOG_W("Dropped the last line of the state file's log: cut short by a process that "
		       "died while writing it log=\"%s\"", st->log_path);
	/* Fold at once what the log holds, a torn tail included, so the log starts empty. */
	if (st->log_bytes && emu_state_save(st, err, errlen) < 0)
		return -1;
	KLOG_I("Loaded state file=\"%s\" objects from the log=%zu resourceVersion=%llu", path,
	       records, (unsigned long long)st->rv);
	return 0;
}
