/*
 * The shared Secret reader (kube/secret.h): base64 as Go's StdEncoding decodes it (the error
 * offsets are those Go 1.26 reports for the same inputs), values a CSI secret cannot carry
 * refused, errors that name the key and never the value, every block wiped before it is freed
 * (through kube_secret_free_hook), and the whole read against a real kube-emulator.
 */
#include <stdlib.h>

#include "check.h"
#include "kube/secret.h"
#include "kube/testing/testenv.h"

static struct kube_testenv env;

struct b64_case {
	const char *in;
	const char *want; /* NULL: refused */
	size_t bad;       /* Go's "illegal base64 data at input byte N" */
};

static const struct b64_case b64_cases[] = {
	{ "", "", 0 },
	{ "YQ==", "a", 0 },
	{ "YWI=", "ab", 0 },
	{ "YWJjZA==", "abcd", 0 },
	{ "YWJj\nZGVm\n", "abcdef", 0 },
	{ "YW\r\nJj", "abc", 0 },
	{ "YQ=\n=", "a", 0 },
	{ "YQ==\r\n\r\n", "a", 0 },
	{ "YR==", "a", 0 }, /* trailing bits are not checked (StdEncoding is not Strict) */
	{ "YQ", NULL, 0 },  /* padding is required */
	{ "YWJ", NULL, 0 },
	{ "Y", NULL, 0 },
	{ "YQ=", NULL, 3 },
	{ "YQ=\n", NULL, 4 },
	{ "Y===", NULL, 1 },
	{ "=YWJ", NULL, 0 },
	{ "YQ=x", NULL, 2 },
	{ "YW*j", NULL, 2 },
	{ "YWJj*", NULL, 4 },
	{ "YQ==YQ==", NULL, 4 },
	{ "YWJjZA=", NULL, 7 },
	{ "YWJ=YQ==", NULL, 4 },
	{ "YQ== ", NULL, 4 }, /* only \r and \n are skipped */
	{ " YQ==", NULL, 0 },
	{ "Y W J j", NULL, 1 },
	{ "-_-_", NULL, 0 },  /* the URL alphabet is not StdEncoding */
};

static void test_base64(void)
{
	for (size_t i = 0; i < sizeof(b64_cases) / sizeof(b64_cases[0]); i++) {
		const struct b64_case *c = &b64_cases[i];
		size_t len = 0, bad = 99;
		char *got = kube_base64_decode_strict(c->in, strlen(c->in), &len, &bad);

		if (c->want && (!got || len != strlen(c->want) || memcmp(got, c->want, len))) {
			fprintf(stderr, "\"%s\": want \"%s\", got %s\n", c->in, c->want, got ? got : "(refused)");
			check_failures++;
		} else if (!c->want && (got || bad != c->bad)) {
			fprintf(stderr, "\"%s\": want refused at byte %zu, got %s (byte %zu)\n", c->in,
				c->bad, got ? "a value" : "refused", bad);
			check_failures++;
		}
		free(got);
	}
	size_t len = 0, bad = 0;
	char *ff = kube_base64_decode_strict("////", 4, &len, &bad);
	CHECK(ff && len == 3 && (unsigned char)ff[0] == 0xff && ff[3] == '\0');
	free(ff);
}

/* A Secret object with these data entries (JSON text of the "data" map). */
static json_t *secret_with(const char *data)
{
	char buf[1024];
	json_error_t je;

	snprintf(buf, sizeof(buf), "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"},"
		 "\"data\":%s}", data);
	json_t *j = json_loads(buf, 0, &je);
	if (!j)
		fprintf(stderr, "bad test JSON: %s\n", buf);
	return j;
}

struct decode_case {
	const char *what;
	const char *data;
	const char *want; /* "" accepted; else the error */
};

/* c2VjcmV0: "secret"; 4pyTIMOgIGxhIG1vZGU=: "✓ à la mode"; /w==: 0xff; YQBi: "a\0b"; wMA=: an
 * overlong NUL; 7aCA: a UTF-16 surrogate; 9JCAgA==: past U+10FFFF. */
static const struct decode_case decode_cases[] = {
	{ "two values", "{\"user\":\"YWRtaW4=\",\"password\":\"c2VjcmV0\"}", "" },
	{ "UTF-8 beyond ASCII", "{\"motto\":\"4pyTIMOgIGxhIG1vZGU=\"}", "" },
	{ "an empty value, and a null one", "{\"a\":\"\",\"b\":null}", "" },
	{ "no data", "null", "" },
	{ "bad base64", "{\"user\":\"YWRtaW4=\",\"password\":\"c2VjcmV0*\"}",
	  "data key \"password\": illegal base64 data at input byte 8" },
	{ "missing padding", "{\"token\":\"YQ\"}", "data key \"token\": illegal base64 data at input byte 0" },
	{ "not UTF-8", "{\"blob\":\"/w==\"}",
	  "data key \"blob\": the value is not valid UTF-8, which a CSI secret (a protobuf string) must be" },
	{ "an overlong NUL", "{\"blob\":\"wMA=\"}",
	  "data key \"blob\": the value is not valid UTF-8, which a CSI secret (a protobuf string) must be" },
	{ "a surrogate", "{\"blob\":\"7aCA\"}",
	  "data key \"blob\": the value is not valid UTF-8, which a CSI secret (a protobuf string) must be" },
	{ "past U+10FFFF", "{\"blob\":\"9JCAgA==\"}",
	  "data key \"blob\": the value is not valid UTF-8, which a CSI secret (a protobuf string) must be" },
	{ "a NUL inside", "{\"blob\":\"YQBi\"}",
	  "data key \"blob\": the value holds a NUL byte, which kcsi cannot pass in a CSI secret" },
	{ "a number", "{\"n\":5}", "data key \"n\": the value is not a base64 string" },
	{ "data a list", "[\"YQ==\"]", "data is not a map of keys to base64 strings" },
};

static void test_decode(void)
{
	for (size_t i = 0; i < sizeof(decode_cases) / sizeof(decode_cases[0]); i++) {
		const struct decode_case *c = &decode_cases[i];
		json_t *j = secret_with(c->data);
		struct kube_secret s;
		char err[256] = "";
		int rc = kube_secret_decode(j, &s, err, sizeof(err));

		if ((rc == 0) != !*c->want || (rc && strcmp(err, c->want))) {
			fprintf(stderr, "case \"%s\": want \"%s\", got %d \"%s\"\n", c->what, c->want, rc, err);
			check_failures++;
		}
		/* the value never appears in the error */
		CHECK(!strstr(err, "secret\"") && !strstr(err, "c2VjcmV0"));
		if (rc == 0)
			kube_secret_free(&s);
		json_decref(j);
	}
	json_t *j = secret_with("{\"user\":\"YWRtaW4=\",\"password\":\"c2VjcmV0\",\"motto\":\"4pyTIMOgIGxhIG1vZGU=\"}");
	struct kube_secret s;
	char err[256];
	CHECK_INT(kube_secret_decode(j, &s, err, sizeof(err)), 0);
	CHECK_INT(s.n, 3);
	for (size_t i = 0; i < s.n; i++) {
		if (!strcmp(s.entries[i].key, "user"))
			CHECK_STR(s.entries[i].value, "admin");
		else if (!strcmp(s.entries[i].key, "password"))
			CHECK(s.entries[i].len == 6 && !strcmp(s.entries[i].value, "secret"));
		else
			CHECK_STR(s.entries[i].value, "\xe2\x9c\x93 \xc3\xa0 la mode");
	}
	kube_secret_free(&s);
	CHECK(s.mem == NULL && s.entries == NULL && s.n == 0);
	kube_secret_free(&s); /* twice: a no-op */
	kube_secret_free(NULL);
	json_decref(j);
}

/* The free hook sees each block just before free(): it must be all zeros by then. */
static size_t hook_calls, hook_nonzero, hook_len;
static void free_hook(const void *block, size_t len)
{
	const unsigned char *p = block;
	hook_calls++;
	hook_len = len;
	for (size_t i = 0; i < len; i++)
		hook_nonzero += p[i] != 0;
}

static void test_wiped(void)
{
	json_t *j = secret_with("{\"user\":\"YWRtaW4=\",\"password\":\"c2VjcmV0\"}");
	struct kube_secret s;
	char err[256];

	kube_secret_free_hook = free_hook;
	hook_calls = hook_nonzero = 0;
	CHECK_INT(kube_secret_decode(j, &s, err, sizeof(err)), 0);
	size_t len = s.memlen;
	CHECK(memmem(s.mem, s.memlen, "secret", 6) != NULL); /* the value was there */
	kube_secret_free(&s);
	CHECK_INT(hook_calls, 1);
	CHECK_INT(hook_len, len);
	CHECK_INT(hook_nonzero, 0);
	/* a Secret refused half-way wipes what it had decoded */
	json_decref(j);
	j = secret_with("{\"a\":\"YWRtaW4=\",\"b\":\"/w==\"}");
	hook_calls = hook_nonzero = 0;
	CHECK_INT(kube_secret_decode(j, &s, err, sizeof(err)), -1);
	CHECK(hook_calls <= 1 && hook_nonzero == 0);
	json_decref(j);
	kube_secret_free_hook = NULL;
}

/* The whole read against kube-emulator: a good Secret, a malformed one, a missing one. */
static void test_read(void)
{
	struct kube_err e;
	json_t *good = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Secret",
				 "metadata", "name", "good", "data", "user", "YWRtaW4=", "password", "c2VjcmV0");
	json_t *bad = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
				"metadata", "name", "bad", "data", "password", "c2Vj*mV0");
	json_t *r1 = kube_create(env.client, &KUBE_RES_SECRETS, "default", good, &e);
	json_t *r2 = kube_create(env.client, &KUBE_RES_SECRETS, "default", bad, &e);
	CHECK(r1 && r2);
	json_decref(r1), json_decref(r2), json_decref(good), json_decref(bad);

	struct kube_secret s;
	char err[512] = "";
	kube_secret_free_hook = free_hook;
	hook_calls = hook_nonzero = 0;
	CHECK_INT(kube_secret_read(env.client, "default", "good", &s, err, sizeof(err)), 0);
	CHECK_INT(s.n, 2);
	kube_secret_free(&s);
	CHECK(hook_calls == 1 && hook_nonzero == 0);
	kube_secret_free_hook = NULL;
	CHECK_INT(kube_secret_read(env.client, "default", "bad", &s, err, sizeof(err)), -1);
	CHECK_STR(err, "data key \"password\": illegal base64 data at input byte 4");
	CHECK_INT(kube_secret_read(env.client, "default", "none", &s, err, sizeof(err)), -1);
	CHECK_STR(err, "secrets \"none\" not found");
}

int main(void)
{
	RUN(test_base64);
	RUN(test_decode);
	RUN(test_wiped);
	int rc = kube_testenv_start(&env, KCSI_EMULATOR_BIN, NULL);
	if (rc)
		return rc == KUBE_TESTENV_SKIP ? rc : 1;
	RUN(test_read);
	kube_testenv_stop(&env);
	return CHECK_DONE();
}
