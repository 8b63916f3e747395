/*
 * kcsi-loopplugin's --extra-volume-tags (seed 003's flag of the EBS driver): the flag's checks as
 * a table (what a user typing the flag gets told), and the tags' life in a real pool: recorded
 * in the volume's metadata, read back, and absent from a volume whose metadata predates them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "check.h"
#include "loopplugin/driver.h"
#include "loopplugin/exec.h"
#include "loopplugin/pool.h"

#define MiB (1024LL * 1024)

static void test_check_table(void)
{
	char k128[129], k129[130], v256[257], v257[258];
	memset(k128, 'k', 128), k128[128] = 0;
	memset(k129, 'k', 129), k129[129] = 0;
	memset(v256, 'v', 256), v256[256] = 0;
	memset(v257, 'v', 257), v257[257] = 0;
	static char empty[] = "", spaced[] = " team", tab[] = "te\tam", high[] = "caf\xc3\xa9";
	static char ok_key[] = "team", ok_val[] = "storage", utf8_val[] = "caf\xc3\xa9";
	static char bad_utf8[] = "caf\xc3", ctl_val[] = "a\x1b[31m";
	const struct {
		const char *what;
		struct lp_tag tag;
		int rc;
		const char *says; /* a piece of the error */
	} cases[] = {
		{ "a plain tag", { ok_key, ok_val }, 0, NULL },
		{ "an empty value", { ok_key, empty }, 0, NULL },
		{ "a UTF-8 value", { ok_key, utf8_val }, 0, NULL },
		{ "a 128-byte key", { k128, ok_val }, 0, NULL },
		{ "a 256-byte value", { ok_key, v256 }, 0, NULL },
		{ "an empty key", { empty, ok_val }, -1, "is 0 bytes long; a key has 1 to 128" },
		{ "a 129-byte key", { k129, ok_val }, -1, "is 129 bytes long" },
		{ "a key with a leading space", { spaced, ok_val }, -1, "byte 0 is not allowed" },
		{ "a key with a tab", { tab, ok_val }, -1, "byte 2 is not allowed" },
		{ "a key outside ASCII", { high, ok_val }, -1, "byte 3 is not allowed" },
		{ "a 257-byte value", { ok_key, v257 }, -1, "is 257 bytes long, more than 256" },
		{ "a value cut inside a character", { ok_key, bad_utf8 }, -1, "is not valid UTF-8 (byte 3)" },
		{ "a value with an escape", { ok_key, ctl_val }, -1, "holds a control character (byte 1)" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lp_tag t = cases[i].tag;
		char err[300] = "";
		int rc = lp_tags_check(&t, 1, err, sizeof(err));
		if (rc != cases[i].rc || (cases[i].says && !strstr(err, cases[i].says)))
			fprintf(stderr, "case \"%s\": rc=%d err=\"%s\"\n", cases[i].what, rc, err);
		CHECK_INT(rc, cases[i].rc);
		if (cases[i].says)
			CHECK(strstr(err, cases[i].says) != NULL);
	}
	/* The count is bounded: 50 pass, 51 are refused with the figures. */
	struct lp_tag many[51];
	for (int i = 0; i < 51; i++)
		many[i] = (struct lp_tag){ ok_key, ok_val };
	char err[300] = "";
	CHECK_INT(lp_tags_check(many, 50, err, sizeof(err)), 0);
	CHECK_INT(lp_tags_check(many, 51, err, sizeof(err)), -1);
	CHECK_STR(err, "51 tags, more than 50");
	CHECK_INT(lp_tags_check(NULL, 0, err, sizeof(err)), 0);
}

static void test_metadata_round_trip(void)
{
	char dir[] = "/tmp/kcsi-lp-tags-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct lp_status st;
	struct lp_pool *p = lp_pool_open(dir, &st);
	CHECK(p != NULL);
	if (!p)
		return;
	static char k1[] = "team", v1[] = "storage", k2[] = "cost-center/id", v2[] = "42";
	struct lp_tag tags[] = { { k1, v1 }, { k2, v2 } };
	struct lp_volume v = { .id = lp_volume_id_for_name("tagged"), .name = "tagged",
			       .size = 4 * MiB, .fstype = "ext4", .source_kind = "",
			       .source_id = "", .zone = "local", .created_ns = 1,
			       .tags = tags, .ntags = 2 };
	CHECK_INT(lp_volume_create(p, &v, NULL, &st), 0);
	struct lp_volume *back = NULL;
	CHECK_INT(lp_volume_load(p, v.id, &back, &st), 0);
	CHECK(back && back->ntags == 2);
	for (size_t i = 0; back && i < back->ntags && i < 2; i++) {
		const char *want = !strcmp(back->tags[i].key, "team") ? "storage" : "42";
		CHECK_STR(back->tags[i].value, want);
	}
	lp_volume_free(back);

	/* A volume without tags (as one created before the flag existed) loads with none. */
	struct lp_volume plain = v;
	plain.id = lp_volume_id_for_name("plain");
	plain.name = "plain";
	plain.tags = NULL;
	plain.ntags = 0;
	CHECK_INT(lp_volume_create(p, &plain, NULL, &st), 0);
	CHECK_INT(lp_volume_load(p, plain.id, &back, &st), 0);
	CHECK(back && back->ntags == 0 && back->tags == NULL);
	lp_volume_free(back);

	/* A copy owns its strings. */
	struct lp_tag *c = lp_tags_dup(tags, 2);
	CHECK(c && c[1].key != tags[1].key);
	CHECK_STR(c[1].key, "cost-center/id");
	lp_tags_free(c, 2);
	CHECK(lp_tags_dup(tags, 0) == NULL);

	CHECK_INT(lp_volume_delete(p, v.id, &st), 0);
	CHECK_INT(lp_volume_delete(p, plain.id, &st), 0);
	free(v.id);
	free(plain.id);
	lp_pool_free(p);
	struct strbuf out = STRBUF_INIT;
	const char *argv[] = { "rm", "-rf", dir, NULL };
	lp_exec(argv, &out);
	strbuf_release(&out);
}

int main(void)
{
	RUN(test_check_table);
	RUN(test_metadata_round_trip);
	return CHECK_DONE();
}
