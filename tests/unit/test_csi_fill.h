/*
 * test_csi_fill: fills every field of any CSI message with deterministic values, driven by the
 * protobuf-c descriptors, so round-trip tests cover every field of every RPC (maps, repeated
 * fields, oneofs, wrappers, timestamps, enums) without a hand-written fixture per message.
 * `seed` varies the values and which member of each oneof is set.
 */
#ifndef KCSI_TEST_CSI_FILL_H
#define KCSI_TEST_CSI_FILL_H

#include "csi/msg.h"

void csi_test_fill(struct csi_arena *a, ProtobufCMessage *m, unsigned seed, int depth);
/* Packs m into a malloc'd buffer; *len gets its size. */
uint8_t *csi_test_pack(const ProtobufCMessage *m, size_t *len);

#endif
