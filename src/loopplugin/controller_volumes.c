/*
 * controller_volumes: the Controller RPCs that make, remove, grow and check volumes:
 * CreateVolume (sizes, parameters, topology, content sources, idempotent repeats),
 * DeleteVolume, ControllerExpandVolume, ValidateVolumeCapabilities.
 */
#include "loopplugin/driver_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "loopplugin/fs.h"

/*
 * The size to create from a capacity range, or an error (OUT_OF_RANGE / INVALID_ARGUMENT).
 * floor is the least size the volume can have, and floor_why says why ("the source's size",
 * "the smallest xfs"), for the message when the limit is below it.
 */
static int pick_size(struct lp_driver *d, const char *what, const Csi__V1__CapacityRange *cr,
		     int64_t floor, const char *floor_why, int64_t *size, struct lp_status *st)
{
	int64_t req = cr ? cr->required_bytes : 0, lim = cr ? cr->limit_bytes : 0;
	if (req < 0 || lim < 0)
		return lp_fail(st, LP_INVALID_ARGUMENT, "%s: negative capacity range", what);
	if (lim && req > lim)
		return lp_fail(st, LP_OUT_OF_RANGE,
			       "%s: required bytes %lld exceed the limit %lld", what,
			       (long long)req, (long long)lim);
	/* no size asked for: the source's size when cloning, else 1 GiB (or the limit) */
	int64_t s = req ? req : floor ? floor : (lim && lim < GiB ? lim : GiB);
	if (s < floor)
		s = floor;
	if (s > d->cfg.max_volume_size || s > INT64_MAX - (MiB - 1))
		return lp_fail(st, LP_OUT_OF_RANGE,
			       "%s: %lld bytes exceed the largest volume, %lld bytes "
			       "(--max-volume-size)",
			       what, (long long)s, (long long)d->cfg.max_volume_size);
	s = (s + MiB - 1) / MiB * MiB; /* cannot overflow: checked above */
	if (lim && s > lim)
		return lp_fail(st, LP_OUT_OF_RANGE,
			       "%s: %lld bytes (sizes are whole MiB%s%s) exceed the limit %lld",
			       what, (long long)s, floor ? ", at least " : "",
			       floor ? floor_why : "", (long long)lim);
	if (s > d->cfg.max_volume_size)
		return lp_fail(st, LP_OUT_OF_RANGE,
			       "%s: %lld bytes exceed the largest volume, %lld bytes "
			       "(--max-volume-size)",
			       what, (long long)s, (long long)d->cfg.max_volume_size);
	*size = s;
	return 0;
}

/* Why an existing volume does not match a repeated CreateVolume; NULL when it does. */
static const char *mismatch(const struct lp_volume *v, const char *name,
			    const Csi__V1__CapacityRange *cr, bool thick, const struct capset *cs,
			    const char *src_kind, const char *src_id)
{
	if (strcmp(v->name, name) != 0)
		return "another name maps to the same ID";
	if (cr && cr->required_bytes && v->size < cr->required_bytes)
		return "its capacity is smaller than now required";
	if (cr && cr->limit_bytes && v->size > cr->limit_bytes)
		return "its capacity is larger than the limit now given";
	if (v->thick != thick)
		return "its parameters (type) differ";
	if (v->block != cs->block)
		return "its access type (block/mount) differs";
	if (!cs->block && strcmp(v->fstype, cs->fstype) != 0)
		return "its fs type differs";
	if (strcmp(v->source_kind, src_kind) != 0 || strcmp(v->source_id, src_id) != 0)
		return "its content source differs";
	return NULL;
}

static int create_volume(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			 ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__CreateVolumeRequest *req = (const Csi__V1__CreateVolumeRequest *)reqm;
	struct lp_status st;
	if (lp_empty(req->name))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "CreateVolume: name is missing");
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->name);
	struct capset cs;
	bool thick;
	int mthick;
	if (lp_check_name("CreateVolume", "name", req->name, &st) ||
	    lp_check_caps(d, what, req->volume_capabilities, req->n_volume_capabilities, &cs, &st) ||
	    lp_parse_params(what, req->n_parameters, req->parameters, &thick, &st) ||
	    lp_parse_mutable(what, req->n_mutable_parameters, req->mutable_parameters, &mthick,
			     &st) ||
	    lp_check_topology(d, what, req->accessibility_requirements, &st))
		return lp_fail_call(ctx, &st);
	if (mthick >= 0) /* the spec: mutable parameters win over parameters */
		thick = mthick == 1;

	/* the content source must exist; a clone is at least as large as its source */
	const char *src_kind = "", *src_id = "";
	char *src_image = NULL;
	int64_t floor = 0;
	const Csi__V1__VolumeContentSource *cs_src = req->volume_content_source;
	if (cs_src && cs_src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT) {
		src_kind = "snapshot";
		src_id = cs_src->snapshot && cs_src->snapshot->snapshot_id
				 ? cs_src->snapshot->snapshot_id : "";
		struct lp_snapshot *s;
		if (lp_snapshot_load(d->pool, src_id, &s, &st))
			return csi_ctx_error(ctx, st.code, "%s: source %s", what, st.msg);
		floor = s->size;
		src_image = lp_snapshot_image(d->pool, s->id);
		lp_snapshot_free(s);
	} else if (cs_src && cs_src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME) {
		src_kind = "volume";
		src_id = cs_src->volume && cs_src->volume->volume_id ? cs_src->volume->volume_id
								     : "";
		struct lp_volume *sv;
		if (lp_volume_load(d->pool, src_id, &sv, &st))
			return csi_ctx_error(ctx, st.code, "%s: source %s", what, st.msg);
		floor = sv->size;
		src_image = lp_volume_image(d->pool, sv->id);
		lp_volume_free(sv);
	}
	/* a filesystem mkfs cannot make that small gets its smallest size (xfs: 300 MiB) */
	const char *floor_why = "the source's size";
	if (!cs.block && lp_fs_min_bytes(cs.fstype) > floor) {
		floor = lp_fs_min_bytes(cs.fstype);
		floor_why = "300 MiB, the smallest xfs";
	}
	int64_t size;
	if (pick_size(d, what, req->capacity_range, floor, floor_why, &size, &st)) {
		free(src_image);
		return lp_fail_call(ctx, &st);
	}

	char *id = lp_volume_id_for_name(req->name);
	char key[200];
	int ret = 0;
	if (!lp_op_begin(d, 'c', id, key, sizeof(key))) {
		ret = lp_op_busy(ctx, id);
		goto out;
	}
	struct lp_volume *v = NULL;
	if (lp_volume_load(d->pool, id, &v, &st) == 0) {
		const char *why = mismatch(v, req->name, req->capacity_range, thick, &cs, src_kind,
					   src_id);
		if (why)
			ret = csi_ctx_error(ctx, LP_ALREADY_EXISTS,
					    "%s already exists as %s, incompatible: %s", what, id,
					    why);
	} else if (st.code != LP_NOT_FOUND) {
		ret = lp_fail_call(ctx, &st);
	} else {
		v = xcalloc(1, sizeof(*v));
		v->id = xstrdup(id);
		v->name = xstrdup(req->name);
		v->size = size;
		v->thick = thick;
		v->block = cs.block;
		v->fstype = xstrdup(cs.block ? "" : cs.fstype);
		v->source_kind = xstrdup(src_kind);
		v->source_id = xstrdup(src_id);
		v->zone = xstrdup(d->cfg.zone);
		v->tags = lp_tags_dup(d->cfg.extra_tags, d->cfg.nextra_tags);
		v->ntags = d->cfg.nextra_tags;
		v->created_ns = wall_now_ns();
		if (lp_volume_create(d->pool, v, src_image, &st))
			ret = lp_fail_call(ctx, &st);
		else
			KLOG_I("Created volume volume=%s name=%s size=%lld thick=%d source=\"%s%s%s\"",
			       LOGQ(id), LOGQ(req->name), (long long)size, thick, src_kind, *src_kind ? "/" : "",
			       src_id);
	}
	if (!ret) {
		Csi__V1__CreateVolumeResponse *r = (Csi__V1__CreateVolumeResponse *)resp;
		r->volume = lp_csi_volume(csi_ctx_arena(ctx), d, v);
	}
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
out:
	free(id);
	free(src_image);
	return ret;
}

static int delete_volume(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			 ProtobufCMessage *resp, void *arg)
{
	(void)resp;
	struct lp_driver *d = arg;
	const Csi__V1__DeleteVolumeRequest *req = (const Csi__V1__DeleteVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT, "DeleteVolume: volume_id is missing");
	char key[200];
	if (!lp_op_begin(d, 'c', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_status st;
	struct lp_volume *v;
	int ret = 0;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st) == 0) {
		if (v->natt) {
			struct strbuf nodes = STRBUF_INIT;
			for (size_t i = 0; i < v->natt; i++)
				strbuf_addf(&nodes, "%s%s", i ? ", " : "", v->att[i].node);
			ret = csi_ctx_error(ctx, LP_FAILED_PRECONDITION,
					    "volume %s is still published to node(s) %s",
					    v->id, nodes.buf);
			strbuf_release(&nodes);
		} else if (lp_in_use_on_nodes(ctx, d, v->id, NULL, &ret)) {
			/* ret set: staged somewhere, the image stays */
		} else if (lp_volume_delete(d->pool, v->id, &st)) {
			ret = lp_fail_call(ctx, &st);
		} else {
			KLOG_I("Deleted volume volume=%s name=%s", LOGQ(v->id), LOGQ(v->name));
		}
		lp_volume_free(v);
	} else if (st.code != LP_NOT_FOUND) {
		ret = lp_fail_call(ctx, &st);
	}
	lp_inflight_end(d->inflight, key);
	return ret;
}

static int controller_expand(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			     ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ControllerExpandVolumeRequest *req =
		(const Csi__V1__ControllerExpandVolumeRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ControllerExpandVolume: volume_id is missing");
	if (!req->capacity_range)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: ControllerExpandVolume: capacity_range is missing",
				     req->volume_id);
	char key[200];
	if (!lp_op_begin(d, 'c', req->volume_id, key, sizeof(key)))
		return lp_op_busy(ctx, req->volume_id);
	struct lp_status st;
	struct lp_volume *v = NULL;
	int ret = 0;
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", req->volume_id);
	int64_t size;
	/* Never smaller than now: required_bytes 0 (or below the size) keeps the volume's size. */
	if (lp_volume_load(d->pool, req->volume_id, &v, &st) ||
	    pick_size(d, what, req->capacity_range, v->size, "the volume's size", &size, &st)) {
		ret = lp_fail_call(ctx, &st);
		goto out;
	}
	if (size > v->size) {
		if (lp_volume_grow(d->pool, v, size, &st)) {
			ret = lp_fail_call(ctx, &st);
			goto out;
		}
		KLOG_I("Expanded volume volume=%s size=%lld", LOGQ(v->id), (long long)size);
	}
	Csi__V1__ControllerExpandVolumeResponse *r = (Csi__V1__ControllerExpandVolumeResponse *)resp;
	r->capacity_bytes = v->size;
	/* a staged volume's loop device must re-read its size; a filesystem must grow */
	r->node_expansion_required = !v->block || v->natt > 0;
out:
	lp_volume_free(v);
	lp_inflight_end(d->inflight, key);
	return ret;
}

/* A copy of a capability in the arena: responses must not point into the request. */
static VolCap *copy_cap(struct csi_arena *a, const VolCap *c)
{
	VolCap *n = csi_msg_new(a, &csi__v1__volume_capability__descriptor);
	n->access_mode = csi_msg_new(a, &csi__v1__volume_capability__access_mode__descriptor);
	n->access_mode->mode = c->access_mode->mode;
	n->access_type_case = c->access_type_case;
	if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
		n->block = csi_msg_new(a, &csi__v1__volume_capability__block_volume__descriptor);
	} else {
		n->mount = csi_msg_new(a, &csi__v1__volume_capability__mount_volume__descriptor);
		if (c->mount) {
			n->mount->fs_type = csi_arena_strdup(a, c->mount->fs_type ? c->mount->fs_type : "");
			for (size_t i = 0; i < c->mount->n_mount_flags; i++)
				csi_repeated_add(a, &n->mount->base, "mount_flags",
						 csi_arena_strdup(a, c->mount->mount_flags[i]));
		}
	}
	return n;
}

static int validate_caps(struct csi_call_ctx *ctx, const ProtobufCMessage *reqm,
			 ProtobufCMessage *resp, void *arg)
{
	struct lp_driver *d = arg;
	const Csi__V1__ValidateVolumeCapabilitiesRequest *req =
		(const Csi__V1__ValidateVolumeCapabilitiesRequest *)reqm;
	if (lp_empty(req->volume_id))
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "ValidateVolumeCapabilities: volume_id is missing");
	if (!req->n_volume_capabilities)
		return csi_ctx_error(ctx, LP_INVALID_ARGUMENT,
				     "volume %s: volume capabilities are missing", req->volume_id);
	struct lp_status st;
	struct lp_volume *v;
	if (lp_volume_load(d->pool, req->volume_id, &v, &st))
		return lp_fail_call(ctx, &st);
	Csi__V1__ValidateVolumeCapabilitiesResponse *r =
		(Csi__V1__ValidateVolumeCapabilitiesResponse *)resp;
	struct csi_arena *a = csi_ctx_arena(ctx);
	char what[300];
	snprintf(what, sizeof(what), "volume %.200s", v->id);
	struct capset cs;
	bool thick;
	if (lp_check_caps(d, what, req->volume_capabilities, req->n_volume_capabilities, &cs, &st) ||
	    lp_caps_fit_volume(v, &cs, &st) ||
	    lp_parse_params(what, req->n_parameters,
			    (Csi__V1__CreateVolumeRequest__ParametersEntry **)req->parameters, &thick,
			    &st)) {
		r->message = csi_arena_strdup(a, st.msg);
	} else {
		r->confirmed = csi_msg_new(
			a, &csi__v1__validate_volume_capabilities_response__confirmed__descriptor);
		for (size_t i = 0; i < req->n_volume_capabilities; i++)
			csi_repeated_add(a, &r->confirmed->base, "volume_capabilities",
					 copy_cap(a, req->volume_capabilities[i]));
		for (size_t i = 0; i < req->n_parameters; i++)
			csi_map_add(a, &r->confirmed->base, "parameters", req->parameters[i]->key,
				    req->parameters[i]->value);
		for (size_t i = 0; i < req->n_volume_context; i++)
			csi_map_add(a, &r->confirmed->base, "volume_context",
				    req->volume_context[i]->key, req->volume_context[i]->value);
	}
	lp_volume_free(v);
	return 0;
}

void lp_register_controller_volumes(struct lp_driver *d, struct csi_server *s)
{
	csi_server_handle(s, CSI_METHOD(Controller, CreateVolume), create_volume, d);
	csi_server_handle(s, CSI_METHOD(Controller, DeleteVolume), delete_volume, d);
	csi_server_handle(s, CSI_METHOD(Controller, ControllerExpandVolume), controller_expand, d);
	csi_server_handle(s, CSI_METHOD(Controller, ValidateVolumeCapabilities), validate_caps, d);
}
