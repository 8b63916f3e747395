/*
 * emu_proto: decodes the protobuf request bodies kubectl's generators send (`kubectl create
 * namespace|secret generic|configmap`): a runtime.Unknown envelope holding a v1 Namespace,
 * Secret or ConfigMap, turned into the JSON object the verbs read. Everything else is refused.
 */
#ifndef KCSI_EMULATOR_PROTO_H
#define KCSI_EMULATOR_PROTO_H

#include <stddef.h>

/* The object as compact JSON text (caller frees), or NULL with a message in err. */
char *emu_proto_to_json(const void *body, size_t len, char *err, size_t errlen);

#endif
