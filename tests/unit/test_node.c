/*
 * Unit tests of kcsi-node's pure parts: the SHA-256 hex digest (base/sha256) that names the
 * kubelet's global mount directories and VolumeAttachments (a wrong digest means mounts nobody
 * finds again).
 */
#include "check.h"
#include "base/sha256.h"

#include <string.h>

static void test_sha256_vectors(void)
{
	static const struct {
		const char *in, *hex;
	} cases[] = {
		/* FIPS 180-4 examples: empty, one block, two blocks (padding spills over) */
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		/* 55 and 64 bytes: the last length that fits one padded block, and a full block */
		{ "0123456789012345678901234567890123456789012345678901234",
		  "f34d5a0f80c0cbf84c8c0b90218c22637abd199965249da736a20143c8c9c9d9" },
		{ "0123456789012345678901234567890123456789012345678901234567890123",
		  "9674d9e078535b7cec43284387a6ee39956188e735a85452b0050b55341cda56" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[65];
		sha256_hex(cases[i].in, strlen(cases[i].in), out);
		CHECK_STR(out, cases[i].hex);
	}
}

int main(void)
{
	RUN(test_sha256_vectors);
	return CHECK_DONE();
}
