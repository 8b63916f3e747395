/* Label selectors as users write them in --label-selector flags and list calls. */
#include "check.h"
#include "kube/selector.h"

static const struct kube_kv LABELS[] = {
	{ "app", "db" }, { "tier", "backend" }, { "example.com/zone", "a" }, { "replicas", "3" },
};
#define NL (sizeof(LABELS) / sizeof(LABELS[0]))

static int m(const char *text)
{
	char err[256];
	struct kube_selector *s = kube_selector_parse(text, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "parse \"%s\": %s\n", text, err);
		return -1;
	}
	int r = kube_selector_matches(s, LABELS, NL);
	kube_selector_free(s);
	return r;
}

static void test_match(void)
{
	CHECK_INT(m(""), 1);
	CHECK_INT(m("app=db"), 1);
	CHECK_INT(m("app==db"), 1);
	CHECK_INT(m("app = db , tier=backend"), 1);
	CHECK_INT(m("app=web"), 0);
	CHECK_INT(m("app!=web"), 1);
	CHECK_INT(m("missing!=x"), 1);
	CHECK_INT(m("app in (web, db)"), 1);
	CHECK_INT(m("app notin (web,db)"), 0);
	CHECK_INT(m("missing notin (a)"), 1);
	CHECK_INT(m("tier"), 1);
	CHECK_INT(m("!tier"), 0);
	CHECK_INT(m("!missing"), 1);
	CHECK_INT(m("example.com/zone=a"), 1);
	CHECK_INT(m("replicas>2,replicas<4"), 1);
	CHECK_INT(m("replicas>3"), 0);
	CHECK_INT(m("app>1"), 0); /* not an integer label */
	CHECK_INT(m("app in (db),tier notin (frontend),example.com/zone"), 1);
	CHECK_INT(m("app="), 0); /* empty value: only an empty label matches */
	CHECK_INT(m("app in(db)"), 1); /* a word ends at '(' */
	CHECK_INT(m("!app"), 0);
}

static void test_errors(void)
{
	const char *bad[][2] = {
		{ "app=db,", "expected a label key" },
		{ "app db", "expected an operator" },
		{ "app in db", "expected '('" },
		{ "app in (a b)", "expected ',' or ')'" },
		{ "-app=x", "invalid label key" },
		{ "Bad_Prefix/x=y", "invalid label key" },
		{ "app=-x", "invalid value" },
		{ "n>x", "expected an integer" },
		{ "a=b)", "expected ',' between requirements" },
		/* kube-apiserver's rules, one grammar with kube-emulator's since issue 26 */
		{ "app db", "found 'db', expected an operator" },
		{ "app in ()", "values set can't be empty" },
		{ "!", "expected a label key" },
		{ "n>99999999999999999999", "expected an integer" },
		{ "n>-1", "invalid value" },
		{ "a/b/c=x", "invalid label key" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		struct kube_selector *s = kube_selector_parse(bad[i][0], err, sizeof(err));
		CHECK(s == NULL);
		if (!strstr(err, bad[i][1]))
			fprintf(stderr, "\"%s\": got \"%s\"\n", bad[i][0], err);
		CHECK(strstr(err, bad[i][1]) != NULL);
		CHECK(strstr(err, "at position") != NULL);
		kube_selector_free(s);
	}
}

int main(void)
{
	RUN(test_match);
	RUN(test_errors);
	return CHECK_DONE();
}
