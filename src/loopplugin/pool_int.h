/*
 * pool_int: what the files of the pool share (pool.h opens with the map of which file owns
 * what). Not for use outside the pool's files.
 *
 * Every write goes through pool_files.c: a temporary file held under flock(), fsync, rename,
 * fsync of the folder. Metadata is JSON (jansson), read whole on every load: pools hold
 * hundreds of volumes, not millions, and reading is what keeps a shared pool consistent
 * between processes.
 */
#ifndef KCSI_LOOPPLUGIN_POOL_INT_H
#define KCSI_LOOPPLUGIN_POOL_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopplugin/pool.h"

struct lp_pool {
	char *dir;          /* absolute, symlinks resolved */
	pthread_mutex_t mu; /* lp_pool_lock() between threads ... */
	int lockfd;         /* ... and flock() on .lock between processes */
	int node_lockfd;    /* nodes/<node>.lock held for the process's life, or -1 */
};

/* ---- paths (pool_paths.c) ---- */

/* "<pool>/<sub>/<id><ext>", malloc'd. */
char *lp_pool_path(const struct lp_pool *p, const char *sub, const char *id, const char *ext);

/* Node IDs are free text from the CO; they become file names only when they are safe ones. */
static inline bool lp_node_id_safe(const char *node) { return lp_id_valid(node); }

/* ---- files (pool_files.c) ---- */

/* fsync()s the folder that holds file, so a rename or unlink in it is durable. */
int lp_fsync_dir(const char *file);
/* Creates dir and its parents (0755); 0 or an errno. */
int lp_mkdir_p(const char *dir);
bool lp_has_suffix(const char *s, const char *suffix);
/* The status a failed write's errno means: no room is RESOURCE_EXHAUSTED. */
enum lp_code lp_code_for_errno(int err);

/* Writes j to path atomically (compact, keys sorted); 0 or an errno. */
int lp_save_json(const char *path, json_t *j);
/* Loads path; NULL with *enoent set when it does not exist, why saying what is wrong. */
json_t *lp_load_json(const char *path, bool *enoent, char *why, size_t whylen);
/* A member as a malloc'd string ("" when missing) or a number (0 when missing). */
char *lp_jstr(json_t *o, const char *key);
int64_t lp_jint(json_t *o, const char *key);

/*
 * Builds an image at path (through path.tmp): a copy of src (if any), then sized to size and,
 * when thick, fully allocated. Returns 0 or an errno. With locked_fd the new image stays
 * locked (*locked_fd, the caller closes it) until the caller has committed its metadata.
 */
int lp_build_image(const char *path, const char *src, int64_t size, bool thick, int *locked_fd);
/* Removes <sub>/<id>.json, then <sub>/<id>.img; what names the kind in the message. */
int lp_pool_remove_files(struct lp_pool *p, const char *sub, const char *id, const char *what,
			 struct lp_status *st);
/* The IDs of the metadata files in <sub>, in creation order, then by ID (as lp_volume_list). */
int lp_pool_list_dir(struct lp_pool *p, const char *sub, char ***ids, int64_t **created,
		     size_t *n, struct lp_status *st);

/* ---- attachments (pool_attach.c) ---- */

/*
 * A crash between taking a device name and saving the volume's metadata leaves a name file no
 * metadata backs; removes those (the name would otherwise stay taken forever). Returns how many.
 */
int lp_pool_reconcile_names(struct lp_pool *p);

#endif
