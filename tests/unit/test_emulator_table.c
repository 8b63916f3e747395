/*
 * Unit tests for emu_table (Age as kubectl prints it, content negotiation, PVC and pod cells) and
 * emu_proto (the protobuf bodies kubectl's generators send, and malformed ones).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "emulator/emu_proto.h"
#include "emulator/emu_store.h"
#include "emulator/emu_table.h"

static void test_human_duration(void)
{
	static const struct {
		long long s;
		const char *want;
	} cases[] = {
		{ -5, "<invalid>" }, { -1, "0s" }, { 0, "0s" }, { 119, "119s" }, { 120, "2m" },
		{ 185, "3m5s" }, { 600, "10m" }, { 179 * 60, "179m" }, { 3 * 3600, "3h" },
		{ 3 * 3600 + 5 * 60, "3h5m" }, { 8 * 3600, "8h" }, { 47 * 3600, "47h" },
		{ 48 * 3600, "2d" }, { 50 * 3600, "2d2h" }, { 8 * 86400, "8d" },
		{ 730LL * 86400, "2y" }, { 731LL * 86400, "2y1d" }, { 3000LL * 86400, "8y" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		emu_human_duration(cases[i].s, buf, sizeof(buf));
		CHECK_STR(buf, cases[i].want);
	}
}

static void test_wanted(void)
{
	struct emu_table_req r;
	CHECK(emu_table_wanted("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;"
			       "as=Table;v=v1beta1;g=meta.k8s.io,application/json", NULL, &r));
	CHECK_STR(r.version, "v1");
	CHECK_INT(r.include, EMU_INCLUDE_METADATA);
	CHECK(emu_table_wanted("application/json; as=Table; g=meta.k8s.io; v=v1beta1", "Object",
			       &r));
	CHECK_STR(r.version, "v1beta1");
	CHECK_INT(r.include, EMU_INCLUDE_OBJECT);
	CHECK(!emu_table_wanted("application/json", NULL, &r));
	CHECK(!emu_table_wanted("application/json, application/json;as=Table;v=v1;g=meta.k8s.io",
				NULL, &r));
	CHECK(!emu_table_wanted("application/json;as=Table;v=v2;g=meta.k8s.io", NULL, &r));
	CHECK(!emu_table_wanted(NULL, NULL, &r));
}

static json_t *row_cells(const char *plural, const char *group, const char *obj, time_t now)
{
	struct emu_store st;
	emu_store_init(&st, 1);
	int res = emu_store_resource(&st, group, "v1", plural);
	CHECK(res >= 0);
	struct emu_table_req req = { "v1", EMU_INCLUDE_METADATA };
	json_t *t = emu_table_new(&st.res[res], &req, "7");
	json_t *o = json_loads(obj, 0, NULL);
	emu_table_add_row(t, &st.res[res], &req, o, now);
	json_t *cells = json_incref(json_object_get(json_array_get(json_object_get(t, "rows"), 0),
						    "cells"));
	json_decref(o);
	json_decref(t);
	emu_store_free(&st);
	return cells;
}

static void test_pvc_cells(void)
{
	time_t now = 1700000000 + 300; /* 5 minutes after 2023-11-14T22:13:20Z */
	json_t *c = row_cells("persistentvolumeclaims", "",
		"{\"metadata\":{\"name\":\"claim-1\",\"creationTimestamp\":\"2023-11-14T22:13:20Z\"},"
		"\"spec\":{\"volumeName\":\"pv-1\",\"storageClassName\":\"loop\"},\"status\":{"
		"\"phase\":\"Bound\",\"capacity\":{\"storage\":\"1Gi\"},\"accessModes\":"
		"[\"ReadWriteMany\",\"ReadWriteOnce\"]}}", now);
	char *s = json_dumps(c, JSON_COMPACT);
	CHECK_STR(s, "[\"claim-1\",\"Bound\",\"pv-1\",\"1Gi\",\"RWO,RWX\",\"loop\",\"<unset>\","
		  "\"5m\",\"<unset>\"]");
	free(s);
	json_decref(c);
	c = row_cells("pods", "", "{\"metadata\":{\"name\":\"web\",\"creationTimestamp\":"
		"\"2023-11-14T22:13:20Z\",\"deletionTimestamp\":\"2023-11-14T22:14:20Z\"},\"spec\":"
		"{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}],\"nodeName\":\"n1\"},\"status\":"
		"{\"phase\":\"Running\",\"containerStatuses\":[{\"ready\":true,\"restartCount\":2,"
		"\"state\":{\"running\":{}}},{\"ready\":false,\"restartCount\":1,\"state\":{"
		"\"waiting\":{\"reason\":\"CrashLoopBackOff\"}}}]}}", now);
	s = json_dumps(c, JSON_COMPACT);
	CHECK_STR(s, "[\"web\",\"1/2\",\"Terminating\",\"3\",\"5m\",\"<none>\",\"n1\",\"<none>\","
		  "\"<none>\"]");
	free(s);
	json_decref(c);
}

static void test_proto(void)
{
	/* what kubectl 1.32 sends for: create secret generic s1 --from-literal=a=b --from-literal=cc=dd */
	static const unsigned char secret[] = {
		0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0c, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x06, 0x53, 0x65,
		0x63, 0x72, 0x65, 0x74, 0x12, 0x28, 0x0a, 0x12, 0x0a, 0x02, 0x73, 0x31, 0x12, 0x00,
		0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x06,
		0x0a, 0x01, 0x61, 0x12, 0x01, 0x62, 0x12, 0x08, 0x0a, 0x02, 0x63, 0x63, 0x12, 0x02,
		0x64, 0x64, 0x1a, 0x00, 0x1a, 0x00, 0x22, 0x00,
	};
	char err[1024];
	char *j = emu_proto_to_json(secret, sizeof(secret), err, sizeof(err));
	CHECK(j != NULL);
	if (j)
		CHECK_STR(j, "{\"metadata\":{\"name\":\"s1\"},\"data\":{\"a\":\"Yg==\",\"cc\":"
			  "\"ZGQ=\"},\"apiVersion\":\"v1\",\"kind\":\"Secret\"}");
	free(j);
	/* every truncation of it is refused or decodes to less; none crashes or reads past */
	for (size_t n = 0; n < sizeof(secret); n++) {
		unsigned char *cut = malloc(n ? n : 1);
		memcpy(cut, secret, n);
		free(emu_proto_to_json(cut, n, err, sizeof(err)));
		free(cut);
	}
	static const unsigned char pod[] = { 'k', '8', 's', 0, 0x0a, 0x07, 0x0a, 0x02, 'v', '1',
					     0x12, 0x01, 'X' };
	CHECK(emu_proto_to_json(pod, sizeof(pod), err, sizeof(err)) == NULL);
	CHECK(strstr(err, "decodes protobuf only for v1 Namespace, Secret, ConfigMap, Binding, "
			  "Event (v1 and events.k8s.io/v1)") != NULL);
	/* the whole reason, however long: it ends with what to do */
	CHECK(strstr(err, "not v1 X; send JSON") != NULL);
	/* kube-scheduler's pods/binding: Binding {1 metadata {1 name}, 2 target {1 kind, 3 name}} */
	static const unsigned char binding[] = {
		'k', '8', 's', 0, 0x0a, 0x0d, 0x0a, 0x02, 'v', '1', 0x12, 0x07, 'B', 'i', 'n', 'd',
		'i', 'n', 'g', 0x12, 0x16, 0x0a, 0x04, 0x0a, 0x02, 'p', '1', 0x12, 0x0e, 0x0a, 0x04,
		'N', 'o', 'd', 'e', 0x1a, 0x06, 'n', 'o', 'd', 'e', '-', '1'
	};
	j = emu_proto_to_json(binding, sizeof(binding), err, sizeof(err));
	CHECK(j != NULL);
	if (j)
		CHECK_STR(j, "{\"metadata\":{\"name\":\"p1\"},\"target\":{\"kind\":\"Node\","
			  "\"name\":\"node-1\"},\"apiVersion\":\"v1\",\"kind\":\"Binding\"}");
	free(j);
	/* kube-scheduler's events.k8s.io Event: Go writes the zero deprecatedFirstTimestamp (13) as an
	 * empty message, which is no time at all (it was read as 1970 and the Event refused) */
	static const unsigned char event[] = {
		'k', '8', 's', 0, 0x0a, 0x19, 0x0a, 0x10, 'e', 'v', 'e', 'n', 't', 's', '.', 'k', '8',
		's', '.', 'i', 'o', '/', 'v', '1', 0x12, 0x05, 'E', 'v', 'e', 'n', 't', 0x12, 0x0a,
		0x0a, 0x03, 0x0a, 0x01, 'e', 0x3a, 0x01, 'R', 0x6a, 0x00
	};
	j = emu_proto_to_json(event, sizeof(event), err, sizeof(err));
	CHECK(j != NULL);
	if (j)
		CHECK_STR(j, "{\"metadata\":{\"name\":\"e\"},\"reason\":\"R\",\"apiVersion\":"
			  "\"events.k8s.io/v1\",\"kind\":\"Event\"}");
	free(j);
}

int main(void)
{
	RUN(test_human_duration);
	RUN(test_wanted);
	RUN(test_pvc_cells);
	RUN(test_proto);
	return CHECK_DONE();
}
