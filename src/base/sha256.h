/*
 * sha256: the hex SHA-256 digest Kubernetes derives names from (VolumeAttachment names
 * csi-<sha256(handle+driver+node)>, kubelet's global mount directory <sha256(handle)>, seed 001's
 * pv-<sha256(pv+node)>). The digest itself is GnuTLS's.
 */
#ifndef KCSI_BASE_SHA256_H
#define KCSI_BASE_SHA256_H

#include <stddef.h>

/* Writes the 64 lowercase hex digits and a NUL into hex. */
void sha256_hex(const void *data, size_t len, char hex[65]);

#endif
