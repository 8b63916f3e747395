/*
 * emu_table: server-side printing, as kube-apiserver does for
 * `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` asks for).
 *
 * A Table (meta.k8s.io/v1 or v1beta1) has columnDefinitions (name, type, format, priority; priority
 * 1 columns are the ones `-o wide` adds) and one row per object whose cells are computed here
 * from the object, with the column sets and cell formats of kube-apiserver 1.32's printers
 * (pkg/printers/internalversion) and of the snapshot CRDs' additionalPrinterColumns. Kinds
 * without a printer get Name and Age. Each row carries the object as kubectl needs it for
 * `--show-labels` and `-A`: PartialObjectMetadata by default, the whole object with
 * `includeObject=Object`, nothing with `None`.
 *
 * Ownership: every function returns a new reference the caller owns; inputs are borrowed.
 */
#ifndef KCSI_EMULATOR_TABLE_H
#define KCSI_EMULATOR_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "emulator/emu_store.h"

enum emu_include { EMU_INCLUDE_METADATA = 0, EMU_INCLUDE_OBJECT, EMU_INCLUDE_NONE };

struct emu_table_req {
	const char *version;     /* "v1" or "v1beta1" */
	enum emu_include include;
};

/*
 * Whether an Accept header asks for a Table: the first media range that names one
 * (as=Table;g=meta.k8s.io;v=v1|v1beta1) before any plain JSON one. Fills req and returns true.
 */
bool emu_table_wanted(const char *accept, const char *include_object, struct emu_table_req *req);

/* An empty Table of r's columns (rows: []), metadata.resourceVersion = rv. */
json_t *emu_table_new(const struct emu_resource *r, const struct emu_table_req *req,
		      const char *rv);
/* Appends obj's row to table; now is the time Age is measured against. */
void emu_table_add_row(json_t *table, const struct emu_resource *r,
		       const struct emu_table_req *req, const json_t *obj, time_t now);

/* Go's duration.HumanDuration for seconds elapsed: "5s", "3m12s", "2d4h", "<invalid>". */
void emu_human_duration(long long seconds, char *buf, size_t len);

#endif
