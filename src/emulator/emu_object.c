/* emu_object: see emu_object.h. */
#include "emulator/emu_object.h"

#include <string.h>
#include <time.h>

#include "base/timeutil.h"
#include "emulator/emu_internal.h"

json_t *emu_meta_of(json_t *obj)
{
	json_t *m = json_object_get(obj, "metadata");
	if (!json_is_object(m)) {
		m = json_object();
		json_object_set_new(obj, "metadata", m);
	}
	return m;
}

const char *emu_meta_str(const json_t *obj, const char *field)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

void emu_now_rfc3339(char *buf, size_t len)
{
	rfc3339_format(time(NULL), buf, len);
}

bool emu_all_strings(const json_t *v, bool map)
{
	if (map ? !json_is_object(v) : !json_is_array(v))
		return false;
	const char *k;
	size_t i;
	json_t *e;
	if (map) {
		json_object_foreach((json_t *)v, k, e)
			if (!json_is_string(e))
				return false;
	} else {
		json_array_foreach((json_t *)v, i, e)
			if (!json_is_string(e))
				return false;
	}
	return true;
}

bool emu_is_pod(const struct emu_resource *r)
{
	return !*r->group && !strcmp(r->plural, "pods");
}

const char *emu_pod_node(const json_t *pod)
{
	const char *n = json_string_value(json_object_get(json_object_get(pod, "spec"),
							  "nodeName"));
	return n ? n : "";
}
