/* Hex SHA-256 over libcrypto's one-shot digest; see sha256.h. */
#include "base/sha256.h"

#include <openssl/sha.h>
#include <stdio.h>

void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(data, len, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
