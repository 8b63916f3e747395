/* libFuzzer: the kcsi CLI's value parsers (cmd/kcsi/args.c): sizes, counts, capabilities,
 * topologies and key=value options. The first byte picks the parser. */
#include "fuzz_common.h"
#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *s = fuzz_cstr(data + 1, size - 1), err[512];
	struct cli c = { 0 };
	c.arena = csi_arena_new();
	int64_t b;
	int32_t n;
	switch (data[0] % 5) {
	case 0:
		if (cli_parse_bytes(s, &b, err, sizeof(err)) == 0 && b < 0)
			abort();
		break;
	case 1:
		if (cli_parse_count(s, &n, err, sizeof(err)) == 0 && n < 0)
			abort();
		break;
	case 2:
		cli_parse_cap(&c, s, err, sizeof(err));
		break;
	case 3:
		cli_parse_topology(&c, s, err, sizeof(err));
		break;
	case 4: {
		struct cli_opt o = { "param", s };
		c.opts = &o;
		c.nopts = 1;
		ProtobufCMessage *m = csi_msg_new(c.arena, &csi__v1__create_volume_request__descriptor);
		cli_add_kv_opts(&c, m, "param", "parameters", err, sizeof(err));
		break;
	}
	}
	csi_arena_free(c.arena);
	free(s);
	return 0;
}
