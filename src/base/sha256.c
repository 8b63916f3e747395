/* Hex SHA-256 over GnuTLS's one-shot digest (GnuTLS is the TLS library kcsi loads anyway); see
 * sha256.h. */
#include "base/sha256.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>

void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, md) != 0)
		memset(md, 0, sizeof(md)); /* cannot happen: SHA-256 is always built in */
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
