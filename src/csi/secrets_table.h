/*
 * csi/secrets_table: the schema's (csi_secret) = true fields, generated at build time from
 * proto/csi.proto by gen_secrets.awk (protoc-c drops custom options). Internal to src/csi.
 */
#ifndef KCSI_CSI_SECRETS_TABLE_H
#define KCSI_CSI_SECRETS_TABLE_H

struct csi_secret_field {
	const char *message; /* full name, e.g. "csi.v1.CreateVolumeRequest"; NULL ends the list */
	unsigned field;      /* field number */
};
extern const struct csi_secret_field csi_secret_fields[];

#endif
