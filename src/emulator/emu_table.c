/*
 * emu_table: Table output for kubectl get. One printer per kind: a column table and a function
 * that appends the cells of one object, in the order of the columns. The cell formats follow
 * kube-apiserver's printers: "<none>" for a missing optional value, "<unset>" for an unset
 * class or mode, Age as Go's duration.HumanDuration, booleans and integers as JSON values
 * (kubectl prints them), CRD columns as null when the path is missing (kubectl shows "<none>").
 */
#include "emulator/emu_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strbuf.h"
#include "base/timeutil.h"

struct column {
	const char *name, *type, *format;
	int priority;
};

typedef void (*cells_fn)(json_t *cells, const json_t *o, time_t now);

struct printer {
	const char *group, *plural;
	const struct column *cols;
	size_t ncols;
	cells_fn cells;
};

/* ---- helpers ---- */

static const json_t *at(const json_t *o, const char *path)
{
	char seg[128];
	while (o && *path) {
		size_t n = strcspn(path, ".");
		snprintf(seg, sizeof(seg), "%.*s", (int)n, path);
		o = json_object_get(o, seg);
		path += n + (path[n] ? 1 : 0);
	}
	return o;
}

static const char *str(const json_t *o, const char *path)
{
	return json_string_value(at(o, path));
}

static const char *str_or(const json_t *o, const char *path, const char *dflt)
{
	const char *s = str(o, path);
	return s && *s ? s : dflt;
}

static void add_s(json_t *cells, const char *s)
{
	json_array_append_new(cells, json_string(s ? s : ""));
}

static void add_i(json_t *cells, long long v)
{
	json_array_append_new(cells, json_integer(v));
}

static void add_b(json_t *cells, bool v)
{
	json_array_append_new(cells, json_boolean(v));
}

/* The value at path as it is (CRD columns), or null. */
static void add_raw(json_t *cells, const json_t *o, const char *path)
{
	const json_t *v = at(o, path);
	json_array_append_new(cells, v ? json_deep_copy(v) : json_null());
}

void emu_human_duration(long long s, char *buf, size_t len)
{
	long long m = s / 60, h = s / 3600, d = h / 24;
	if (s < -1)
		snprintf(buf, len, "<invalid>");
	else if (s < 0)
		snprintf(buf, len, "0s");
	else if (s < 120)
		snprintf(buf, len, "%llds", s);
	else if (m < 10)
		s % 60 ? snprintf(buf, len, "%lldm%llds", m, s % 60) : snprintf(buf, len, "%lldm", m);
	else if (m < 180)
		snprintf(buf, len, "%lldm", m);
	else if (h < 8)
		m % 60 ? snprintf(buf, len, "%lldh%lldm", h, m % 60) : snprintf(buf, len, "%lldh", h);
	else if (h < 48)
		snprintf(buf, len, "%lldh", h);
	else if (h < 24 * 8)
		h % 24 ? snprintf(buf, len, "%lldd%lldh", d, h % 24) : snprintf(buf, len, "%lldd", d);
	else if (h < 24 * 365 * 2)
		snprintf(buf, len, "%lldd", d);
	else if (h < 24 * 365 * 8)
		d % 365 ? snprintf(buf, len, "%lldy%lldd", d / 365, d % 365) :
			  snprintf(buf, len, "%lldy", d / 365);
	else
		snprintf(buf, len, "%lldy", d / 365);
}

/* translateTimestampSince: "<unknown>" for a missing or unparsable timestamp. */
static void add_since(json_t *cells, const char *ts, time_t now)
{
	time_t t;
	char buf[32];
	if (!ts || rfc3339_parse(ts, &t) < 0)
		snprintf(buf, sizeof(buf), "<unknown>");
	else
		emu_human_duration((long long)(now - t), buf, sizeof(buf));
	add_s(cells, buf);
}

static void add_age(json_t *cells, const json_t *o, time_t now)
{
	add_since(cells, str(o, "metadata.creationTimestamp"), now);
}

static bool deleting(const json_t *o)
{
	return at(o, "metadata.deletionTimestamp") != NULL;
}

/* RWO,ROX,RWX,RWOP as kubectl abbreviates access modes. */
static void add_access_modes(json_t *cells, const json_t *modes)
{
	static const char *const names[][2] = { { "ReadWriteOnce", "RWO" },
						{ "ReadOnlyMany", "ROX" },
						{ "ReadWriteMany", "RWX" },
						{ "ReadWriteOncePod", "RWOP" } };
	struct strbuf sb = STRBUF_INIT;
	for (size_t n = 0; n < 4; n++) {
		size_t i;
		json_t *m;
		json_array_foreach((json_t *)modes, i, m) {
			const char *s = json_string_value(m);
			if (s && !strcmp(s, names[n][0])) {
				strbuf_addf(&sb, "%s%s", sb.len ? "," : "", names[n][1]);
				break;
			}
		}
	}
	add_s(cells, sb.len ? sb.buf : "");
	strbuf_release(&sb);
}

/* ---- printers ---- */

#define NAME_COL { "Name", "string", "name", 0 }
#define AGE_COL { "Age", "string", "", 0 }
/* a CRD's Age column (its additionalPrinterColumns) is a date, a built-in kind's a string */
#define CRD_AGE_COL { "Age", "date", "", 0 }

static const struct column default_cols[] = { NAME_COL, AGE_COL };
static void default_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_age(c, o, now);
}

static const struct column pod_cols[] = {
	NAME_COL, { "Ready", "string", "", 0 }, { "Status", "string", "", 0 },
	{ "Restarts", "string", "", 0 }, AGE_COL, { "IP", "string", "", 1 },
	{ "Node", "string", "", 1 }, { "Nominated Node", "string", "", 1 },
	{ "Readiness Gates", "string", "", 1 },
};
static void pod_cells(json_t *c, const json_t *o, time_t now)
{
	const char *reason = str_or(o, "status.reason", str_or(o, "status.phase", ""));
	size_t total = json_array_size(at(o, "spec.containers")), ready = 0, i;
	long long restarts = 0;
	json_t *cs;
	const json_t *statuses = at(o, "status.containerStatuses");
	bool running = false;
	for (i = json_array_size(statuses); i-- > 0;) {
		cs = json_array_get(statuses, i);
		restarts += json_integer_value(json_object_get(cs, "restartCount"));
		const char *w = str(cs, "state.waiting.reason");
		const char *t = str(cs, "state.terminated.reason");
		if (w && *w)
			reason = w;
		else if (t && *t)
			reason = t;
		else if (at(cs, "state.terminated"))
			reason = "Completed";
		else if (at(cs, "state.running") && json_is_true(json_object_get(cs, "ready"))) {
			ready++;
			running = true;
		} else if (at(cs, "state.running")) {
			running = true;
		}
	}
	if (!strcmp(reason, "Completed") && running)
		reason = "Running";
	if (deleting(o))
		reason = "Terminating";
	char buf[64];
	snprintf(buf, sizeof(buf), "%zu/%zu", ready, total);
	add_s(c, str(o, "metadata.name"));
	add_s(c, buf);
	add_s(c, reason);
	snprintf(buf, sizeof(buf), "%lld", restarts);
	add_s(c, buf);
	add_age(c, o, now);
	add_s(c, str_or(o, "status.podIP", "<none>"));
	add_s(c, str_or(o, "spec.nodeName", "<none>"));
	add_s(c, str_or(o, "status.nominatedNodeName", "<none>"));
	const json_t *gates = at(o, "spec.readinessGates");
	if (!json_array_size(gates)) {
		add_s(c, "<none>");
	} else {
		size_t met = 0, g;
		json_t *gate, *cond;
		json_array_foreach((json_t *)gates, g, gate) {
			const char *ct = str(gate, "conditionType");
			json_array_foreach((json_t *)at(o, "status.conditions"), i, cond)
				if (ct && str(cond, "type") && !strcmp(ct, str(cond, "type")) &&
				    str(cond, "status") && !strcmp(str(cond, "status"), "True"))
					met++;
		}
		snprintf(buf, sizeof(buf), "%zu/%zu", met, json_array_size(gates));
		add_s(c, buf);
	}
}

static const struct column node_cols[] = {
	NAME_COL, { "Status", "string", "", 0 }, { "Roles", "string", "", 0 }, AGE_COL,
	{ "Version", "string", "", 0 }, { "Internal-IP", "string", "", 1 },
	{ "External-IP", "string", "", 1 }, { "OS-Image", "string", "", 1 },
	{ "Kernel-Version", "string", "", 1 }, { "Container-Runtime", "string", "", 1 },
};
static const char *node_address(const json_t *o, const char *type)
{
	size_t i;
	json_t *a;
	json_array_foreach((json_t *)at(o, "status.addresses"), i, a)
		if (str(a, "type") && !strcmp(str(a, "type"), type))
			return str_or(a, "address", "<none>");
	return "<none>";
}
static void node_cells(json_t *c, const json_t *o, time_t now)
{
	const char *ready = "Unknown";
	size_t i;
	json_t *cond;
	json_array_foreach((json_t *)at(o, "status.conditions"), i, cond) {
		const char *t = str(cond, "type"), *s = str(cond, "status");
		if (t && s && !strcmp(t, "Ready"))
			ready = !strcmp(s, "True") ? "Ready" : !strcmp(s, "False") ? "NotReady" :
							 "Unknown";
	}
	char status[64];
	snprintf(status, sizeof(status), "%s%s", ready,
		 json_is_true(at(o, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
	struct strbuf roles = STRBUF_INIT;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)at(o, "metadata.labels"), k, v) {
		const char *role = NULL;
		if (!strncmp(k, "node-role.kubernetes.io/", 24) && k[24])
			role = k + 24;
		else if (!strcmp(k, "kubernetes.io/role") && json_string_value(v))
			role = json_string_value(v);
		if (role && *role)
			strbuf_addf(&roles, "%s%s", roles.len ? "," : "", role);
	}
	add_s(c, str(o, "metadata.name"));
	add_s(c, status);
	add_s(c, roles.len ? roles.buf : "<none>");
	strbuf_release(&roles);
	add_age(c, o, now);
	add_s(c, str(o, "status.nodeInfo.kubeletVersion"));
	add_s(c, node_address(o, "InternalIP"));
	add_s(c, node_address(o, "ExternalIP"));
	add_s(c, str_or(o, "status.nodeInfo.osImage", "<unknown>"));
	add_s(c, str_or(o, "status.nodeInfo.kernelVersion", "<unknown>"));
	add_s(c, str_or(o, "status.nodeInfo.containerRuntimeVersion", "<unknown>"));
}

static const struct column pvc_cols[] = {
	NAME_COL, { "Status", "string", "", 0 }, { "Volume", "string", "", 0 },
	{ "Capacity", "string", "", 0 }, { "Access Modes", "string", "", 0 },
	{ "StorageClass", "string", "", 0 }, { "VolumeAttributesClass", "string", "", 0 }, AGE_COL,
	{ "VolumeMode", "string", "", 1 },
};
static void pvc_cells(json_t *c, const json_t *o, time_t now)
{
	const char *vol = str_or(o, "spec.volumeName", "");
	add_s(c, str(o, "metadata.name"));
	add_s(c, deleting(o) ? "Terminating" : str_or(o, "status.phase", ""));
	add_s(c, vol);
	if (*vol) {
		add_s(c, str_or(o, "status.capacity.storage", ""));
		add_access_modes(c, at(o, "status.accessModes"));
	} else {
		add_s(c, "");
		add_s(c, "");
	}
	const char *beta = json_string_value(json_object_get(at(o, "metadata.annotations"),
		"volume.beta.kubernetes.io/storage-class"));
	add_s(c, str_or(o, "spec.storageClassName", beta ? beta : ""));
	add_s(c, str_or(o, "spec.volumeAttributesClassName", "<unset>"));
	add_age(c, o, now);
	add_s(c, str_or(o, "spec.volumeMode", "<unset>"));
}

static const struct column pv_cols[] = {
	NAME_COL, { "Capacity", "string", "", 0 }, { "Access Modes", "string", "", 0 },
	{ "Reclaim Policy", "string", "", 0 }, { "Status", "string", "", 0 },
	{ "Claim", "string", "", 0 }, { "StorageClass", "string", "", 0 },
	{ "VolumeAttributesClass", "string", "", 0 }, { "Reason", "string", "", 0 }, AGE_COL,
	{ "VolumeMode", "string", "", 1 },
};
static void pv_cells(json_t *c, const json_t *o, time_t now)
{
	char claim[600] = "";
	const char *cn = str(o, "spec.claimRef.name");
	if (cn)
		snprintf(claim, sizeof(claim), "%s/%s", str_or(o, "spec.claimRef.namespace", ""), cn);
	add_s(c, str(o, "metadata.name"));
	add_s(c, str_or(o, "spec.capacity.storage", ""));
	add_access_modes(c, at(o, "spec.accessModes"));
	add_s(c, str_or(o, "spec.persistentVolumeReclaimPolicy", ""));
	add_s(c, deleting(o) ? "Terminating" : str_or(o, "status.phase", ""));
	add_s(c, claim);
	add_s(c, str_or(o, "spec.storageClassName", ""));
	add_s(c, str_or(o, "spec.volumeAttributesClassName", "<unset>"));
	add_s(c, str_or(o, "status.reason", ""));
	add_age(c, o, now);
	add_s(c, str_or(o, "spec.volumeMode", "<unset>"));
}

static const struct column sc_cols[] = {
	NAME_COL, { "Provisioner", "string", "", 0 }, { "ReclaimPolicy", "string", "", 0 },
	{ "VolumeBindingMode", "string", "", 0 }, { "AllowVolumeExpansion", "string", "", 0 },
	AGE_COL,
};
static void sc_cells(json_t *c, const json_t *o, time_t now)
{
	char name[400];
	const json_t *ann = at(o, "metadata.annotations");
	const char *d1 = json_string_value(json_object_get(ann,
		"storageclass.kubernetes.io/is-default-class"));
	const char *d2 = json_string_value(json_object_get(ann,
		"storageclass.beta.kubernetes.io/is-default-class"));
	bool is_default = (d1 && !strcmp(d1, "true")) || (d2 && !strcmp(d2, "true"));
	snprintf(name, sizeof(name), "%s%s", str_or(o, "metadata.name", ""),
		 is_default ? " (default)" : "");
	add_s(c, name);
	add_s(c, str(o, "provisioner"));
	add_s(c, str_or(o, "reclaimPolicy", "Delete"));
	add_s(c, str_or(o, "volumeBindingMode", "Immediate"));
	add_b(c, json_is_true(json_object_get(o, "allowVolumeExpansion")));
	add_age(c, o, now);
}

static const struct column va_cols[] = {
	NAME_COL, { "Attacher", "string", "name", 0 }, { "PV", "string", "", 0 },
	{ "Node", "string", "", 0 }, { "Attached", "boolean", "", 0 }, AGE_COL,
};
static void va_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str(o, "spec.attacher"));
	add_s(c, str_or(o, "spec.source.persistentVolumeName", ""));
	add_s(c, str(o, "spec.nodeName"));
	add_b(c, json_is_true(at(o, "status.attached")));
	add_age(c, o, now);
}

static const struct column csinode_cols[] = { NAME_COL, { "Drivers", "integer", "", 0 },
					      AGE_COL };
static void csinode_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_i(c, (long long)json_array_size(at(o, "spec.drivers")));
	add_age(c, o, now);
}

static const struct column csidriver_cols[] = {
	NAME_COL, { "AttachRequired", "boolean", "", 0 }, { "PodInfoOnMount", "boolean", "", 0 },
	{ "StorageCapacity", "boolean", "", 0 }, { "TokenRequests", "string", "", 0 },
	{ "RequiresRepublish", "boolean", "", 0 }, { "Modes", "string", "", 0 }, AGE_COL,
};
static void csidriver_cells(json_t *c, const json_t *o, time_t now)
{
	const json_t *ar = at(o, "spec.attachRequired");
	struct strbuf sb = STRBUF_INIT;
	size_t i;
	json_t *v;
	json_array_foreach((json_t *)at(o, "spec.tokenRequests"), i, v)
		strbuf_addf(&sb, "%s%s", sb.len ? "," : "", str_or(v, "audience", ""));
	add_s(c, str(o, "metadata.name"));
	add_b(c, ar ? json_is_true(ar) : true);
	add_b(c, json_is_true(at(o, "spec.podInfoOnMount")));
	add_b(c, json_is_true(at(o, "spec.storageCapacity")));
	add_s(c, sb.len ? sb.buf : "<unset>");
	strbuf_reset(&sb);
	add_b(c, json_is_true(at(o, "spec.requiresRepublish")));
	json_array_foreach((json_t *)at(o, "spec.volumeLifecycleModes"), i, v)
		strbuf_addf(&sb, "%s%s", sb.len ? "," : "", json_string_value(v) ?: "");
	add_s(c, sb.len ? sb.buf : "Persistent");
	strbuf_release(&sb);
	add_age(c, o, now);
}

static const struct column csisc_cols[] = {
	NAME_COL, { "StorageClassName", "string", "", 0 }, { "Capacity", "string", "", 0 }, AGE_COL,
};
static void csisc_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str(o, "storageClassName"));
	add_s(c, str_or(o, "capacity", "<unset>"));
	add_age(c, o, now);
}

static const struct column vac_cols[] = {
	NAME_COL, { "DriverName", "string", "", 0 }, AGE_COL,
};
static void vac_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str_or(o, "driverName", ""));
	add_age(c, o, now);
}

static const struct column event_cols[] = {
	{ "Last Seen", "string", "", 0 }, { "Type", "string", "", 0 },
	{ "Reason", "string", "", 0 }, { "Object", "string", "", 0 },
	{ "Subobject", "string", "", 1 }, { "Source", "string", "", 1 },
	{ "Message", "string", "", 0 }, { "First Seen", "string", "", 1 },
	{ "Count", "string", "", 1 }, { "Name", "string", "name", 1 },
};
/* Events, stored in the core form whichever group wrote them (emu_events.h). */
static void event_cells(json_t *c, const json_t *o, time_t now)
{
	char obj[600], lower[128], buf[64];
	snprintf(lower, sizeof(lower), "%s", str_or(o, "involvedObject.kind", ""));
	for (char *q = lower; *q; q++)
		*q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
	snprintf(obj, sizeof(obj), "%s/%s", lower, str_or(o, "involvedObject.name", ""));
	const char *last = str(o, "lastTimestamp"), *first = str(o, "firstTimestamp");
	const char *series = str(o, "series.lastObservedTime");
	if (series)
		last = series;
	if (!last || !*last)
		last = str(o, "eventTime");
	if (!first || !*first)
		first = str(o, "eventTime");
	if (!last || !*last)
		last = str(o, "metadata.creationTimestamp");
	if (!first || !*first)
		first = str(o, "metadata.creationTimestamp");
	add_since(c, last, now);
	add_s(c, str(o, "type"));
	add_s(c, str(o, "reason"));
	add_s(c, obj);
	add_s(c, str_or(o, "involvedObject.fieldPath", ""));
	const char *comp = str_or(o, "source.component", str_or(o, "reportingComponent", ""));
	const char *host = str_or(o, "source.host", "");
	snprintf(obj, sizeof(obj), "%s%s%s", comp, *host ? ", " : "", host);
	add_s(c, obj);
	add_s(c, str(o, "message"));
	add_since(c, first, now);
	long long count = json_integer_value(json_object_get(o, "count"));
	if (at(o, "series.count"))
		count = json_integer_value(at(o, "series.count"));
	snprintf(buf, sizeof(buf), "%lld", count ? count : 1);
	add_s(c, buf);
	add_s(c, str(o, "metadata.name"));
}

static const struct column lease_cols[] = { NAME_COL, { "Holder", "string", "", 0 }, AGE_COL };
static void lease_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str_or(o, "spec.holderIdentity", "<none>"));
	add_age(c, o, now);
}

static const struct column ns_cols[] = { NAME_COL, { "Status", "string", "", 0 }, AGE_COL };
static void ns_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str_or(o, "status.phase", ""));
	add_age(c, o, now);
}

static const struct column secret_cols[] = {
	NAME_COL, { "Type", "string", "", 0 }, { "Data", "string", "", 0 }, AGE_COL,
};
static void secret_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_s(c, str_or(o, "type", "Opaque"));
	add_i(c, (long long)json_object_size(json_object_get(o, "data")));
	add_age(c, o, now);
}

static const struct column cm_cols[] = { NAME_COL, { "Data", "string", "", 0 }, AGE_COL };
static void cm_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_i(c, (long long)(json_object_size(json_object_get(o, "data")) +
			     json_object_size(json_object_get(o, "binaryData"))));
	add_age(c, o, now);
}

/* The external-snapshotter CRDs' additionalPrinterColumns. */
static const struct column vs_cols[] = {
	NAME_COL, { "ReadyToUse", "boolean", "", 0 }, { "SourcePVC", "string", "", 0 },
	{ "SourceSnapshotContent", "string", "", 0 }, { "RestoreSize", "string", "", 0 },
	{ "SnapshotClass", "string", "", 0 }, { "SnapshotContent", "string", "", 0 },
	{ "CreationTime", "date", "", 0 }, CRD_AGE_COL,
};
static void vs_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_raw(c, o, "status.readyToUse");
	add_raw(c, o, "spec.source.persistentVolumeClaimName");
	add_raw(c, o, "spec.source.volumeSnapshotContentName");
	add_raw(c, o, "status.restoreSize");
	add_raw(c, o, "spec.volumeSnapshotClassName");
	add_raw(c, o, "status.boundVolumeSnapshotContentName");
	const char *ct = str(o, "status.creationTime");
	if (ct)
		add_since(c, ct, now);
	else
		json_array_append_new(c, json_null());
	add_age(c, o, now);
}

static const struct column vsc_cols[] = {
	NAME_COL, { "ReadyToUse", "boolean", "", 0 }, { "RestoreSize", "integer", "", 0 },
	{ "DeletionPolicy", "string", "", 0 }, { "Driver", "string", "", 0 },
	{ "VolumeSnapshotClass", "string", "", 0 }, { "VolumeSnapshot", "string", "", 0 },
	{ "VolumeSnapshotNamespace", "string", "", 0 }, CRD_AGE_COL,
};
static void vsc_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_raw(c, o, "status.readyToUse");
	add_raw(c, o, "status.restoreSize");
	add_raw(c, o, "spec.deletionPolicy");
	add_raw(c, o, "spec.driver");
	add_raw(c, o, "spec.volumeSnapshotClassName");
	add_raw(c, o, "spec.volumeSnapshotRef.name");
	add_raw(c, o, "spec.volumeSnapshotRef.namespace");
	add_age(c, o, now);
}

static const struct column vsclass_cols[] = {
	NAME_COL, { "Driver", "string", "", 0 }, { "DeletionPolicy", "string", "", 0 }, CRD_AGE_COL,
};
static void vsclass_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_raw(c, o, "driver");
	add_raw(c, o, "deletionPolicy");
	add_age(c, o, now);
}

/* The group snapshot CRDs' additionalPrinterColumns (v1beta2). */
static const struct column vgs_cols[] = {
	NAME_COL, { "ReadyToUse", "boolean", "", 0 }, { "VolumeGroupSnapshotClass", "string", "", 0 },
	{ "VolumeGroupSnapshotContent", "string", "", 0 }, { "CreationTime", "date", "", 0 },
	CRD_AGE_COL,
};
static void vgs_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_raw(c, o, "status.readyToUse");
	add_raw(c, o, "spec.volumeGroupSnapshotClassName");
	add_raw(c, o, "status.boundVolumeGroupSnapshotContentName");
	const char *ct = str(o, "status.creationTime");
	if (ct)
		add_since(c, ct, now);
	else
		json_array_append_new(c, json_null());
	add_age(c, o, now);
}

static const struct column vgsc_cols[] = {
	NAME_COL, { "ReadyToUse", "boolean", "", 0 }, { "DeletionPolicy", "string", "", 0 },
	{ "Driver", "string", "", 0 }, { "VolumeGroupSnapshotClass", "string", "", 0 },
	{ "VolumeGroupSnapshotNamespace", "string", "", 0 },
	{ "VolumeGroupSnapshot", "string", "", 0 }, CRD_AGE_COL,
};
static void vgsc_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_raw(c, o, "status.readyToUse");
	add_raw(c, o, "spec.deletionPolicy");
	add_raw(c, o, "spec.driver");
	add_raw(c, o, "spec.volumeGroupSnapshotClassName");
	add_raw(c, o, "spec.volumeGroupSnapshotRef.namespace");
	add_raw(c, o, "spec.volumeGroupSnapshotRef.name");
	add_age(c, o, now);
}

/* kube-apiserver's RBAC printers: roles show when they were created, bindings what they bind */
static const struct column role_cols[] = { NAME_COL, { "Created At", "date", "", 0 } };
static void role_cells(json_t *c, const json_t *o, time_t now)
{
	(void)now;
	add_s(c, str(o, "metadata.name"));
	add_s(c, str(o, "metadata.creationTimestamp"));
}

static const struct column binding_cols[] = {
	NAME_COL, { "Role", "string", "", 0 }, AGE_COL, { "Users", "string", "", 1 },
	{ "Groups", "string", "", 1 }, { "ServiceAccounts", "string", "", 1 },
};
/* The binding's subjects of one kind, comma-separated (service accounts as namespace/name). */
static void add_subjects(json_t *c, const json_t *o, const char *kind)
{
	struct strbuf sb = STRBUF_INIT;
	size_t i;
	json_t *v;
	json_array_foreach((json_t *)at(o, "subjects"), i, v) {
		const char *k = str(v, "kind");
		if (!k || strcmp(k, kind))
			continue;
		strbuf_addf(&sb, "%s", sb.len ? "," : "");
		if (!strcmp(kind, "ServiceAccount"))
			strbuf_addf(&sb, "%s/", str_or(v, "namespace", ""));
		strbuf_addf(&sb, "%s", str_or(v, "name", ""));
	}
	add_s(c, sb.len ? sb.buf : "");
	strbuf_release(&sb);
}
static void binding_cells(json_t *c, const json_t *o, time_t now)
{
	char role[512];
	snprintf(role, sizeof(role), "%s/%s", str_or(o, "roleRef.kind", ""),
		 str_or(o, "roleRef.name", ""));
	add_s(c, str(o, "metadata.name"));
	add_s(c, role);
	add_age(c, o, now);
	add_subjects(c, o, "User");
	add_subjects(c, o, "Group");
	add_subjects(c, o, "ServiceAccount");
}

static const struct column sa_cols[] = { NAME_COL, { "Secrets", "integer", "", 0 }, AGE_COL };
static void sa_cells(json_t *c, const json_t *o, time_t now)
{
	add_s(c, str(o, "metadata.name"));
	add_i(c, (long long)json_array_size(at(o, "secrets")));
	add_age(c, o, now);
}

#define P(g, plural, cols, fn) { g, plural, cols, sizeof(cols) / sizeof(cols[0]), fn }
static const struct printer printers[] = {
	P("", "pods", pod_cols, pod_cells),
	P("", "nodes", node_cols, node_cells),
	P("", "persistentvolumeclaims", pvc_cols, pvc_cells),
	P("", "persistentvolumes", pv_cols, pv_cells),
	P("", "events", event_cols, event_cells),
	P("", "namespaces", ns_cols, ns_cells),
	P("", "secrets", secret_cols, secret_cells),
	P("", "configmaps", cm_cols, cm_cells),
	P("", "serviceaccounts", sa_cols, sa_cells),
	P("rbac.authorization.k8s.io", "clusterroles", role_cols, role_cells),
	P("rbac.authorization.k8s.io", "roles", role_cols, role_cells),
	P("rbac.authorization.k8s.io", "clusterrolebindings", binding_cols, binding_cells),
	P("rbac.authorization.k8s.io", "rolebindings", binding_cols, binding_cells),
	P("storage.k8s.io", "storageclasses", sc_cols, sc_cells),
	P("storage.k8s.io", "volumeattachments", va_cols, va_cells),
	P("storage.k8s.io", "csinodes", csinode_cols, csinode_cells),
	P("storage.k8s.io", "csidrivers", csidriver_cols, csidriver_cells),
	P("storage.k8s.io", "csistoragecapacities", csisc_cols, csisc_cells),
	P("storage.k8s.io", "volumeattributesclasses", vac_cols, vac_cells),
	P("coordination.k8s.io", "leases", lease_cols, lease_cells),
	P("snapshot.storage.k8s.io", "volumesnapshots", vs_cols, vs_cells),
	P("snapshot.storage.k8s.io", "volumesnapshotcontents", vsc_cols, vsc_cells),
	P("snapshot.storage.k8s.io", "volumesnapshotclasses", vsclass_cols, vsclass_cells),
	P("groupsnapshot.storage.k8s.io", "volumegroupsnapshots", vgs_cols, vgs_cells),
	P("groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents", vgsc_cols, vgsc_cells),
	/* a group class prints as a snapshot class does: Driver, DeletionPolicy, Age */
	P("groupsnapshot.storage.k8s.io", "volumegroupsnapshotclasses", vsclass_cols,
	  vsclass_cells),
};

static const struct printer default_printer = P("", "", default_cols, default_cells);

static const struct printer *printer_for(const struct emu_resource *r)
{
	for (size_t i = 0; i < sizeof(printers) / sizeof(printers[0]); i++)
		if (!strcmp(printers[i].group, r->group) && !strcmp(printers[i].plural, r->plural))
			return &printers[i];
	return &default_printer;
}

/* ---- content negotiation and the Table ---- */

/* The value of ";key=" in one media range (len bytes), or "" . */
static void param(const char *range, size_t len, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	*out = '\0';
	for (const char *p = range; p < range + len; p++) {
		if (*p != ';')
			continue;
		const char *q = p + 1;
		while (*q == ' ')
			q++;
		if ((size_t)(range + len - q) > kl && !strncasecmp(q, key, kl) && q[kl] == '=') {
			size_t n = strcspn(q + kl + 1, ";,");
			snprintf(out, outlen, "%.*s", (int)n, q + kl + 1);
			return;
		}
	}
}

bool emu_table_wanted(const char *accept, const char *include_object, struct emu_table_req *req)
{
	if (!accept)
		return false;
	for (const char *p = accept; *p;) {
		size_t n = strcspn(p, ",");
		char as[32], g[32], v[16];
		param(p, n, "as", as, sizeof(as));
		param(p, n, "g", g, sizeof(g));
		param(p, n, "v", v, sizeof(v));
		if (!strcmp(as, "Table") && !strcmp(g, "meta.k8s.io") &&
		    (!strcmp(v, "v1") || !strcmp(v, "v1beta1"))) {
			req->version = !strcmp(v, "v1") ? "v1" : "v1beta1";
			req->include = EMU_INCLUDE_METADATA;
			if (include_object && !strcmp(include_object, "Object"))
				req->include = EMU_INCLUDE_OBJECT;
			else if (include_object && !strcmp(include_object, "None"))
				req->include = EMU_INCLUDE_NONE;
			return true;
		}
		if (!*as && (strncasecmp(p, "application/json", 16) == 0 ||
			     strncmp(p, "*/*", 3) == 0))
			return false;
		p += n + (p[n] ? 1 : 0);
		while (*p == ' ')
			p++;
	}
	return false;
}

json_t *emu_table_new(const struct emu_resource *r, const struct emu_table_req *req,
		      const char *rv)
{
	const struct printer *pr = printer_for(r);
	json_t *cols = json_array();
	for (size_t i = 0; i < pr->ncols; i++) {
		const struct column *c = &pr->cols[i];
		json_array_append_new(cols, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", c->name,
						      "type", c->type, "format", c->format,
						      "description", c->name, "priority",
						      c->priority));
	}
	char av[32];
	snprintf(av, sizeof(av), "meta.k8s.io/%s", req->version);
	json_t *t = json_pack("{s:s, s:s, s:{}, s:o, s:[]}", "kind", "Table", "apiVersion", av,
			      "metadata", "columnDefinitions", cols, "rows");
	if (rv)
		json_object_set_new(json_object_get(t, "metadata"), "resourceVersion",
				    json_string(rv));
	return t;
}

void emu_table_add_row(json_t *table, const struct emu_resource *r,
		       const struct emu_table_req *req, const json_t *obj, time_t now)
{
	const struct printer *pr = printer_for(r);
	json_t *cells = json_array();
	pr->cells(cells, obj, now);
	json_t *row = json_pack("{s:o}", "cells", cells);
	if (req->include == EMU_INCLUDE_OBJECT) {
		json_object_set_new(row, "object", json_deep_copy(obj));
	} else if (req->include == EMU_INCLUDE_METADATA) {
		char av[32];
		snprintf(av, sizeof(av), "meta.k8s.io/%s", req->version);
		json_t *meta = json_deep_copy(json_object_get(obj, "metadata"));
		json_object_del(meta, "managedFields");
		json_object_set_new(row, "object", json_pack("{s:s, s:s, s:o}", "kind",
			"PartialObjectMetadata", "apiVersion", av, "metadata",
			meta ? meta : json_object()));
	}
	json_array_append_new(json_object_get(table, "rows"), row);
}
