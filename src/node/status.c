/*
 * The Node's and the pods' status as the kubelet writes them (node/status.h): the machine's
 * figures read once at start, capacity/allocatable from them and the flags, and pure builders of
 * the JSON that run.c and volumes.c send as merge patches of the status subresource.
 */
#include "node/status.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/route.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/version.h"
#include "kube/quantity.h"

const char *nd_goarch(void)
{
#if defined(__x86_64__)
	return "amd64";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__i386__)
	return "386";
#elif defined(__arm__)
	return "arm";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
	return "ppc64le";
#elif defined(__s390x__)
	return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
	return "riscv64";
#else
	return "unknown";
#endif
}

/* The first line of a small file, without its newline; "" when unreadable. */
static void read_line(const char *path, char *out, size_t len)
{
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(out, (int)len, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

static char *read_text(const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && sb.len < (1 << 20))
		strbuf_add(&sb, buf, n);
	fclose(f);
	return strbuf_detach(&sb, NULL);
}

bool nd_route_default_iface(const char *route, char *iface, size_t len)
{
	const char *line = route ? strchr(route, '\n') : NULL; /* skip the header */
	while (line && *++line) {
		char name[64];
		unsigned long dest, gw, flags;
		if (sscanf(line, "%63s %lx %lx %lx", name, &dest, &gw, &flags) == 4 && dest == 0 &&
		    (flags & RTF_UP)) {
			snprintf(iface, len, "%s", name);
			return true;
		}
		line = strchr(line, '\n');
	}
	return false;
}

void nd_os_release_pretty(const char *text, char *out, size_t len)
{
	snprintf(out, len, "Linux");
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "PRETTY_NAME=", 12) != 0)
			continue;
		const char *v = l + 12, *end = v + strcspn(v, "\n");
		if (end > v && (*v == '"' || *v == '\'')) {
			char q = *v++;
			if (end > v && end[-1] == q)
				end--;
		}
		if (end > v)
			snprintf(out, len, "%.*s", (int)(end - v), v);
		return;
	}
}

/* The IPv4 address of the interface of the default route, or 127.0.0.1. */
static void default_ip(char *out, size_t len)
{
	char iface[64];
	char *route = read_text("/proc/net/route");
	bool found = nd_route_default_iface(route, iface, sizeof(iface));
	free(route);
	snprintf(out, len, "127.0.0.1");
	struct ifaddrs *ifs;
	if (!found || getifaddrs(&ifs) != 0)
		return;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp(i->ifa_name, iface) == 0) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, out,
				  (socklen_t)len);
			break;
		}
	freeifaddrs(ifs);
}

static int64_t meminfo_total(void)
{
	char *t = read_text("/proc/meminfo");
	const char *p = t ? strstr(t, "MemTotal:") : NULL;
	int64_t kb = p ? strtoll(p + 9, NULL, 10) : 0;
	free(t);
	return kb * 1024;
}

/* The huge page sizes the kernel supports, each with its pool (nr_hugepages x size). */
static void read_hugepages(struct nd_machine *m)
{
	DIR *d = opendir("/sys/kernel/mm/hugepages");
	struct dirent *e;
	while (d && (e = readdir(d)) && m->nhugepages < ND_MAX_HUGEPAGES) {
		long long kb;
		if (sscanf(e->d_name, "hugepages-%lldkB", &kb) != 1 || kb <= 0)
			continue;
		char path[512], nr[32];
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/nr_hugepages", e->d_name);
		read_line(path, nr, sizeof(nr));
		char q[KUBE_QUANTITY_BUFLEN];
		kube_quantity_format(kb * 1024, true, q, sizeof(q));
		snprintf(m->hugepage_names[m->nhugepages], sizeof(m->hugepage_names[0]), "hugepages-%s", q);
		m->hugepage_bytes[m->nhugepages++] = strtoll(nr, NULL, 10) * kb * 1024;
	}
	if (d)
		closedir(d);
}

void nd_machine_read(struct nd_machine *m, const char *root_dir, const char *node_ip)
{
	memset(m, 0, sizeof(*m));
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	m->cpus = n > 0 ? n : 1;
	m->memory = meminfo_total();
	struct statvfs sv;
	if (statvfs(root_dir, &sv) == 0)
		m->ephemeral = (int64_t)sv.f_blocks * (int64_t)sv.f_frsize;
	read_hugepages(m);
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s", u.release);
	char *osr = read_text("/etc/os-release");
	if (!osr)
		osr = read_text("/usr/lib/os-release");
	nd_os_release_pretty(osr, m->os_image, sizeof(m->os_image));
	free(osr);
	read_line("/etc/machine-id", m->machine_id, sizeof(m->machine_id));
	if (!m->machine_id[0])
		read_line("/var/lib/dbus/machine-id", m->machine_id, sizeof(m->machine_id));
	read_line("/sys/class/dmi/id/product_uuid", m->system_uuid, sizeof(m->system_uuid));
	read_line("/proc/sys/kernel/random/boot_id", m->boot_id, sizeof(m->boot_id));
	if (gethostname(m->hostname, sizeof(m->hostname)) != 0)
		m->hostname[0] = '\0';
	m->hostname[sizeof(m->hostname) - 1] = '\0';
	for (char *c = m->hostname; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (node_ip && *node_ip)
		snprintf(m->node_ip, sizeof(m->node_ip), "%s", node_ip);
	else
		default_ip(m->node_ip, sizeof(m->node_ip));
}

/* --- capacity and allocatable --- */

static struct nd_resource *res_find(struct nd_resources *rs, const char *name)
{
	for (int i = 0; i < rs->n; i++)
		if (strcmp(rs->r[i].name, name) == 0)
			return &rs->r[i];
	return NULL;
}

static void res_set(struct nd_resources *rs, const char *name, int64_t v)
{
	struct nd_resource *r = res_find(rs, name);
	if (!r && rs->n < ND_MAX_RESOURCES) {
		r = &rs->r[rs->n++];
		r->name = name;
	}
	if (r)
		r->value = v;
}

/* A quantity of resource `name`: cpu in millicores ("500m", "2", "1.5"), others whole. */
static int res_parse(const char *name, const char *s, int64_t *v, char *err, size_t errlen)
{
	if (strcmp(name, "cpu") != 0)
		return kube_quantity_parse(s, v, err, errlen);
	char *end;
	size_t len = strlen(s);
	if (len > 1 && s[len - 1] == 'm') {
		long long m = strtoll(s, &end, 10);
		if (end == s + len - 1 && m >= 0) {
			*v = m;
			return 0;
		}
	} else if (len > 0) {
		double d = strtod(s, &end);
		if (*end == '\0' && d >= 0 && d < 1e12) {
			*v = (int64_t)(d * 1000 + 0.5);
			return 0;
		}
	}
	snprintf(err, errlen, "quantities must match the regular expression of a cpu quantity (\"2\", \"500m\")");
	return -1;
}

static int subtract(struct nd_resources *alloc, const struct flag_map *m, const char *flag,
		    char *err, size_t errlen)
{
	for (size_t i = 0; m && i < m->len; i++) {
		int64_t v;
		char e[256];
		struct nd_resource *r = res_find(alloc, m->items[i].key);
		if (!r) {
			snprintf(err, errlen, "--%s: %s is not a resource of this node", flag,
				 m->items[i].key);
			return -1;
		}
		if (res_parse(r->name, m->items[i].value, &v, e, sizeof(e))) {
			snprintf(err, errlen, "--%s %s=%s: %s", flag, m->items[i].key,
				 m->items[i].value, e);
			return -1;
		}
		r->value = r->value > v ? r->value - v : 0;
	}
	return 0;
}

int nd_resources_build(const struct nd_machine *m, const struct nd_resource_flags *f,
		       struct nd_resources *cap, struct nd_resources *alloc, char *err,
		       size_t errlen)
{
	memset(cap, 0, sizeof(*cap));
	if (f->max_pods <= 0) {
		snprintf(err, errlen, "--max-pods must be positive, not %d", f->max_pods);
		return -1;
	}
	res_set(cap, "cpu", m->cpus * 1000);
	res_set(cap, "ephemeral-storage", m->ephemeral);
	for (int i = 0; i < m->nhugepages; i++)
		res_set(cap, m->hugepage_names[i], m->hugepage_bytes[i]);
	res_set(cap, "memory", m->memory);
	res_set(cap, "pods", f->max_pods);
	for (size_t i = 0; f->capacity && i < f->capacity->len; i++) {
		const struct flag_kv *kv = &f->capacity->items[i];
		int64_t v;
		char e[256];
		if (res_parse(kv->key, kv->value, &v, e, sizeof(e))) {
			snprintf(err, errlen, "--capacity %s=%s: %s", kv->key, kv->value, e);
			return -1;
		}
		if (!res_find(cap, kv->key) && cap->n == ND_MAX_RESOURCES) {
			snprintf(err, errlen, "--capacity: more than %d resources", ND_MAX_RESOURCES);
			return -1;
		}
		res_set(cap, kv->key, v);
	}
	*alloc = *cap;
	if (subtract(alloc, f->system_reserved, "system-reserved", err, errlen) ||
	    subtract(alloc, f->kube_reserved, "kube-reserved", err, errlen))
		return -1;
	return 0;
}

/* --- JSON --- */

static json_t *res_json(const struct nd_resources *rs)
{
	json_t *o = json_object();
	for (int i = 0; i < rs->n; i++) {
		const struct nd_resource *r = &rs->r[i];
		char q[KUBE_QUANTITY_BUFLEN];
		if (strcmp(r->name, "cpu") == 0 && r->value % 1000 != 0)
			snprintf(q, sizeof(q), "%lldm", (long long)r->value);
		else if (strcmp(r->name, "cpu") == 0)
			snprintf(q, sizeof(q), "%lld", (long long)(r->value / 1000));
		else if (strcmp(r->name, "memory") == 0 || strcmp(r->name, "ephemeral-storage") == 0 ||
			 strncmp(r->name, "hugepages-", 10) == 0)
			kube_quantity_format(r->value, true, q, sizeof(q));
		else
			kube_quantity_format(r->value, false, q, sizeof(q));
		json_object_set_new(o, r->name, json_string(q));
	}
	return o;
}

static json_t *condition(const char *type, const char *status, const char *reason,
			 const char *message, const char *now, const char *since)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", type, "status", status, "reason",
			 reason, "message", message, "lastHeartbeatTime", now, "lastTransitionTime",
			 since);
}

json_t *nd_node_status(const struct nd_machine *m, const struct nd_resources *capacity,
		       const struct nd_resources *allocatable, const char *now, const char *since)
{
	char runtime[64];
	snprintf(runtime, sizeof(runtime), "kcsi://%s", kcsi_version);
	json_t *info = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "machineID", m->machine_id,
		"systemUUID", m->system_uuid, "bootID", m->boot_id, "kernelVersion", m->kernel,
		"osImage", m->os_image, "containerRuntimeVersion", runtime, "kubeletVersion",
		kcsi_version, "operatingSystem", "linux", "architecture", nd_goarch());
	json_t *addrs = json_pack("[{s:s, s:s}]", "type", "InternalIP", "address", m->node_ip);
	if (m->hostname[0])
		json_array_append_new(addrs, json_pack("{s:s, s:s}", "type", "Hostname", "address",
						       m->hostname));
	json_t *conds = json_pack(
		"[o, o, o, o]",
		condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
			  "kubelet has sufficient memory available", now, since),
		condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
			  "kubelet has no disk pressure", now, since),
		condition("PIDPressure", "False", "KubeletHasSufficientPID",
			  "kubelet has sufficient PID available", now, since),
		condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now,
			  since));
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "capacity", res_json(capacity), "allocatable",
			 res_json(allocatable), "nodeInfo", info, "addresses", addrs, "conditions",
			 conds);
}

/* The time the scheduler wrote on PodScheduled, else now. */
static const char *scheduled_since(const json_t *pod, const char *now)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *since = json_string_value(json_object_get(c, "lastTransitionTime"));
		if (t && since && strcmp(t, "PodScheduled") == 0)
			return since;
	}
	return now;
}

/*
 * One status per container: waiting with that reason (no container yet: no ID, not started),
 * else terminated (an init container, run to completion before the others start) or running.
 */
static json_t *container_statuses(const json_t *list, const char *uid, bool init,
				  const char *waiting, const char *now)
{
	json_t *out = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(list, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *image = json_string_value(json_object_get(c, "image"));
		if (!name)
			continue;
		char id[256];
		snprintf(id, sizeof(id), "kcsi://%s/%s", uid, name);
		json_t *state = waiting ? json_pack("{s:{s:s}}", "waiting", "reason", waiting)
			      : init ? json_pack("{s:{s:i, s:s, s:s, s:s, s:s}}", "terminated",
						 "exitCode", 0, "reason", "Completed", "startedAt",
						 now, "finishedAt", now, "containerID", id)
				     : json_pack("{s:{s:s}}", "running", "startedAt", now);
		bool up = !init && !waiting;
		json_t *st = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:o}", "name", name, "image",
				       image ? image : "", "imageID", "", "ready", up, "started", up,
				       "restartCount", 0, "state", state);
		if (!waiting)
			json_object_set_new(st, "containerID", json_string(id));
		json_array_append_new(out, st);
	}
	return out;
}

json_t *nd_pod_status(const json_t *pod, const char *uid, const char *ip, const char *now)
{
	const json_t *spec = json_object_get(pod, "spec");
	const char *types[] = { "PodReadyToStartContainers", "Initialized", "ContainersReady",
				"Ready" };
	json_t *conds = json_array();
	for (size_t i = 0; i < 4; i++)
		json_array_append_new(conds, json_pack("{s:s, s:s, s:s}", "type", types[i], "status",
						       "True", "lastTransitionTime", now));
	json_array_append_new(conds, json_pack("{s:s, s:s, s:s}", "type", "PodScheduled", "status",
					       "True", "lastTransitionTime",
					       scheduled_since(pod, now)));
	json_t *st = json_pack("{s:s, s:o, s:s, s:s, s:[{s:s}], s:s, s:[{s:s}], s:o}", "phase",
			       "Running", "conditions", conds, "hostIP", ip, "podIP", ip, "hostIPs",
			       "ip", ip, "startTime", now, "podIPs", "ip", ip, "containerStatuses",
			       container_statuses(json_object_get(spec, "containers"), uid, false,
						  NULL, now));
	json_t *init = json_object_get(spec, "initContainers");
	if (json_array_size(init))
		json_object_set_new(st, "initContainerStatuses",
				    container_statuses(init, uid, true, NULL, now));
	return st;
}

/* "[a b c]": the container names, as the kubelet lists them in its condition messages. */
static void names_of(const json_t *list, struct strbuf *out)
{
	size_t i;
	json_t *c;
	bool first = true;
	strbuf_addch(out, '[');
	json_array_foreach(list, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		if (name) {
			strbuf_addf(out, "%s%s", first ? "" : " ", name);
			first = false;
		}
	}
	strbuf_addch(out, ']');
}

json_t *nd_pod_status_waiting(const json_t *pod, const char *ip, const char *now)
{
	const json_t *spec = json_object_get(pod, "spec");
	const json_t *containers = json_object_get(spec, "containers");
	const json_t *init = json_object_get(spec, "initContainers");
	bool has_init = json_array_size(init) > 0;
	struct strbuf unready = STRBUF_INIT, uninit = STRBUF_INIT;
	strbuf_addstr(&unready, "containers with unready status: ");
	names_of(containers, &unready);
	strbuf_addstr(&uninit, "containers with incomplete status: ");
	names_of(init, &uninit);
	json_t *conds = json_pack("[{s:s, s:s, s:s}]", "type", "PodReadyToStartContainers",
				  "status", "False", "lastTransitionTime", now);
	json_array_append_new(conds, has_init ?
		json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "Initialized", "status", "False",
			  "lastTransitionTime", now, "reason", "ContainersNotInitialized", "message",
			  uninit.buf) :
		json_pack("{s:s, s:s, s:s}", "type", "Initialized", "status", "True",
			  "lastTransitionTime", now));
	const char *types[] = { "Ready", "ContainersReady" };
	for (size_t i = 0; i < 2; i++)
		json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", types[i],
			"status", "False", "lastTransitionTime", now, "reason", "ContainersNotReady",
			"message", unready.buf));
	json_array_append_new(conds, json_pack("{s:s, s:s, s:s}", "type", "PodScheduled", "status",
					       "True", "lastTransitionTime",
					       scheduled_since(pod, now)));
	strbuf_release(&unready);
	strbuf_release(&uninit);
	/* the kubelet's reasons: the containers are being created, or wait for the init ones */
	const char *reason = has_init ? "PodInitializing" : "ContainerCreating";
	json_t *st = json_pack("{s:s, s:o, s:s, s:[{s:s}], s:s, s:o}", "phase", "Pending",
			       "conditions", conds, "hostIP", ip, "hostIPs", "ip", ip, "startTime",
			       now, "containerStatuses",
			       container_statuses(containers, "", false, reason, now));
	if (has_init)
		json_object_set_new(st, "initContainerStatuses",
				    container_statuses(init, "", true, "PodInitializing", now));
	return st;
}
