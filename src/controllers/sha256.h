/*
 * sha256: FIPS 180-4 SHA-256 of a byte string, for the VolumeAttachment names Kubernetes derives
 * from a hash (csi-<hex> and seed 001's pv-<hex>). Small and self-contained so the controllers do
 * not need a crypto library for one digest per attach.
 */
#ifndef KCSI_CONTROLLERS_SHA256_H
#define KCSI_CONTROLLERS_SHA256_H

#include <stddef.h>
#include <stdint.h>

void sha256(const void *data, size_t len, uint8_t out[32]);
/* Writes the 64 lowercase hex digits and a NUL into hex (at least 65 bytes). */
void sha256_hex(const void *data, size_t len, char *hex);

#endif
