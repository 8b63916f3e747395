/*
 * Unit tests for emu_select: label and field selectors (kube/selector.c's grammar) as kubectl and
 * client-go send them, matched against stored JSON, and the object-name rules (kube/names.c)
 * that decide 422 on create.
 */
#include <jansson.h>

#include "check.h"
#include "emulator/emu_select.h"
#include "kube/names.h"
#include "kube/selector.h"

static bool labels_match(const char *sel, const char *labels_json)
{
	char err[256];
	struct kube_selector *s = kube_selector_parse(sel, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "unexpected parse error for %s: %s\n", sel, err);
		return false;
	}
	json_t *l = json_loads(labels_json, 0, NULL);
	bool r = emu_selector_match_labels(s, l);
	json_decref(l);
	kube_selector_free(s);
	return r;
}

static bool label_parse_fails(const char *sel)
{
	char err[256] = "";
	struct kube_selector *s = kube_selector_parse(sel, err, sizeof(err));
	kube_selector_free(s);
	return err[0] && !s;
}

static void test_label_equality(void)
{
	CHECK(labels_match("app=web", "{\"app\":\"web\"}"));
	CHECK(labels_match("app==web", "{\"app\":\"web\"}"));
	CHECK(!labels_match("app=web", "{\"app\":\"db\"}"));
	CHECK(!labels_match("app=web", "{}"));
	CHECK(labels_match("app!=web", "{\"app\":\"db\"}"));
	CHECK(labels_match("app!=web", "{}")); /* != matches a missing key, as upstream */
	CHECK(labels_match("", "{\"a\":\"b\"}"));
	CHECK(labels_match("a=b, c=d", "{\"a\":\"b\",\"c\":\"d\"}"));
	CHECK(!labels_match("a=b,c=d", "{\"a\":\"b\",\"c\":\"x\"}"));
	CHECK(labels_match("a=", "{\"a\":\"\"}"));
}

static void test_label_sets_and_existence(void)
{
	CHECK(labels_match("env in (prod, staging)", "{\"env\":\"staging\"}"));
	CHECK(!labels_match("env in (prod,staging)", "{\"env\":\"dev\"}"));
	CHECK(labels_match("env notin (prod)", "{\"env\":\"dev\"}"));
	CHECK(labels_match("env notin (prod)", "{}"));
	CHECK(!labels_match("env notin (prod)", "{\"env\":\"prod\"}"));
	CHECK(labels_match("env", "{\"env\":\"x\"}"));
	CHECK(!labels_match("env", "{}"));
	CHECK(labels_match("!env", "{}"));
	CHECK(!labels_match("!env", "{\"env\":\"\"}"));
	CHECK(labels_match("example.com/tier=gold,!legacy", "{\"example.com/tier\":\"gold\"}"));
	CHECK(labels_match("n>3", "{\"n\":\"4\"}"));
	CHECK(!labels_match("n<3", "{\"n\":\"4\"}"));
}

static void test_label_errors(void)
{
	CHECK(label_parse_fails("a=b,"));
	CHECK(label_parse_fails("a in b"));
	CHECK(label_parse_fails("a in (b"));
	CHECK(label_parse_fails("-bad=x"));
	CHECK(label_parse_fails("a=b c"));
	CHECK(label_parse_fails("a=-x-"));
	CHECK(label_parse_fails("n>x"));
	CHECK(label_parse_fails("!a=b"));
}

static void test_field_selectors(void)
{
	struct kube_selector *s;
	char err[256];
	json_t *pod = json_loads("{\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns1\"},"
				 "\"spec\":{\"nodeName\":\"node-a\"}}", 0, NULL);
	s = kube_field_selector_parse("metadata.name=p1,spec.nodeName==node-a", err, sizeof(err));
	CHECK(s != NULL);
	CHECK_INT(kube_selector_len(s), 2);
	CHECK_STR(kube_selector_key(s, 1), "spec.nodeName");
	CHECK(emu_selector_match_fields(s, pod));
	kube_selector_free(s);
	CHECK((s = kube_field_selector_parse("spec.nodeName!=node-a", err, sizeof(err))) != NULL);
	CHECK(!emu_selector_match_fields(s, pod));
	kube_selector_free(s);
	CHECK((s = kube_field_selector_parse("spec.nodeName=", err, sizeof(err))) != NULL);
	CHECK(!emu_selector_match_fields(s, pod)); /* a missing field reads as "" */
	kube_selector_free(s);
	CHECK((s = kube_field_selector_parse("metadata.name=a\\,b", err, sizeof(err))) != NULL);
	json_t *odd = json_loads("{\"metadata\":{\"name\":\"a,b\"}}", 0, NULL);
	CHECK(emu_selector_match_fields(s, odd));
	kube_selector_free(s);
	json_decref(odd);
	/* regression: a selector ending in a backslash was read past its end */
	CHECK(kube_field_selector_parse("\\", err, sizeof(err)) == NULL);
	CHECK(kube_field_selector_parse("metadata.name=a\\", err, sizeof(err)) == NULL);
	s = kube_field_selector_parse("metadata.name", err, sizeof(err));
	CHECK(s == NULL);
	CHECK(strstr(err, "can't understand") != NULL);
	json_decref(pod);
}

static void test_names(void)
{
	char err[256];
	CHECK(kube_name_is_dns1123_subdomain("pvc-1234.example", err, sizeof(err)));
	CHECK(!kube_name_is_dns1123_subdomain("Bad_Name", err, sizeof(err)));
	CHECK(strstr(err, "RFC 1123 subdomain") != NULL);
	CHECK(!kube_name_is_dns1123_subdomain("-x", err, sizeof(err)));
	CHECK(!kube_name_is_dns1123_subdomain("x.", err, sizeof(err)));
	CHECK(!kube_name_is_dns1123_subdomain("a..b", err, sizeof(err)));
	CHECK(!kube_name_is_dns1123_subdomain("", err, sizeof(err)));
	char big[300];
	memset(big, 'a', 254);
	big[254] = '\0';
	CHECK(!kube_name_is_dns1123_subdomain(big, err, sizeof(err)));
	/* Real VolumeAttachment names: one 68-character part is fine in a subdomain name. */
	CHECK(kube_name_is_dns1123_subdomain(
		"csi-5e7a1fbd0c6e3b3a0d5c1f9b2a7e8d4c6b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e", err,
		sizeof(err)));
	big[253] = '\0';
	CHECK(kube_name_is_dns1123_subdomain(big, err, sizeof(err)));
	CHECK(kube_name_is_dns1123_label("kube-system", err, sizeof(err)));
	CHECK(!kube_name_is_dns1123_label("a.b", err, sizeof(err)));
	big[64] = '\0';
	CHECK(!kube_name_is_dns1123_label(big, err, sizeof(err)));
}

int main(void)
{
	RUN(test_label_equality);
	RUN(test_label_sets_and_existence);
	RUN(test_label_errors);
	RUN(test_field_selectors);
	RUN(test_names);
	return CHECK_DONE();
}
