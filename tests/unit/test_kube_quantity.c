/* Resource quantities as a user writes them in a PVC, to bytes and back. */
#include "check.h"
#include "kube/quantity.h"

static int64_t q(const char *s)
{
	int64_t v = -12345;
	char err[128];
	if (kube_quantity_parse(s, &v, err, sizeof(err)) != 0)
		return -12345;
	return v;
}

static void test_parse(void)
{
	CHECK_INT(q("10Gi"), 10LL << 30);
	CHECK_INT(q("1G"), 1000000000LL);
	CHECK_INT(q("500M"), 500000000LL);
	CHECK_INT(q("1.5Gi"), 1610612736LL);
	CHECK_INT(q("1e3"), 1000);
	CHECK_INT(q("1E3"), 1000);
	CHECK_INT(q("100m"), 1); /* rounds up, as Quantity.Value() */
	CHECK_INT(q("0"), 0);
	CHECK_INT(q("1536"), 1536);
	CHECK_INT(q("1Ki"), 1024);
	CHECK_INT(q("+2k"), 2000);
	CHECK_INT(q("7Ei"), 7LL << 60);
	CHECK_INT(q("0.5"), 1);
	CHECK_INT(q(".5Ki"), 512);
	CHECK_INT(q("1e-3"), 1);
	CHECK_INT(q("9223372036854775807"), INT64_MAX);
}

static void test_reject(void)
{
	char err[128];
	int64_t v;
	const char *bad[] = { "", "Gi", "10GB", "1.2.3", "abc", "10 Gi", "8Ei", "1e", "1e400",
			      "99999999999999999999", "10gi", "--1", "1ee3" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = kube_quantity_parse(bad[i], &v, err, sizeof(err));
		if (rc == 0)
			fprintf(stderr, "accepted \"%s\"\n", bad[i]);
		CHECK(rc == -1);
		CHECK(strstr(err, "invalid quantity") != NULL);
	}
	kube_quantity_parse("8Ei", &v, err, sizeof(err));
	CHECK(strstr(err, "out of range") != NULL);
}

static void test_format(void)
{
	char b[KUBE_QUANTITY_BUFLEN];
	kube_quantity_format(10LL << 30, true, b, sizeof(b));
	CHECK_STR(b, "10Gi");
	kube_quantity_format(1536LL << 20, true, b, sizeof(b));
	CHECK_STR(b, "1536Mi");
	kube_quantity_format(1000000000LL, true, b, sizeof(b));
	CHECK_STR(b, "1G"); /* not a multiple of 1024: decimal */
	kube_quantity_format(1000000000LL, false, b, sizeof(b));
	CHECK_STR(b, "1G");
	kube_quantity_format(1500, false, b, sizeof(b));
	CHECK_STR(b, "1500");
	kube_quantity_format(0, true, b, sizeof(b));
	CHECK_STR(b, "0");
	kube_quantity_format(1023, true, b, sizeof(b));
	CHECK_STR(b, "1023");
	/* round trip */
	const char *vals[] = { "10Gi", "1G", "500M", "1Ki", "7Ei", "12345" };
	for (size_t i = 0; i < 6; i++) {
		int64_t v = q(vals[i]);
		kube_quantity_format(v, strchr(vals[i], 'i') != NULL, b, sizeof(b));
		CHECK_STR(b, vals[i]);
	}
}

int main(void)
{
	RUN(test_parse);
	RUN(test_reject);
	RUN(test_format);
	return CHECK_DONE();
}
