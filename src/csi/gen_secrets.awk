# Reads proto/csi.proto and writes C: the list of fields marked [(csi_secret) = true], as
# (full message name, field number) pairs. protoc-c does not keep custom field options in its
# descriptors, so the log sanitizer gets the schema's secret markers from this table instead.
# Assumes what proto/csi.proto promises: one declaration per line, braces balanced per block.
BEGIN {
	depth = 0
	print "/* Generated from proto/csi.proto by src/csi/gen_secrets.awk. Do not edit. */"
	print "#include \"csi/secrets_table.h\""
	print "const struct csi_secret_field csi_secret_fields[] = {"
}
{
	line = $0
	sub(/\/\/.*/, "", line)
	if (match(line, /^[ \t]*package[ \t]+[A-Za-z0-9_.]+/)) {
		pkg = line
		sub(/^[ \t]*package[ \t]+/, "", pkg)
		sub(/[ \t]*;.*/, "", pkg)
	}
	if (line ~ /csi_secret\)[ \t]*=[ \t]*true/ && depth > 0 && kind[depth] == "M") {
		num = line
		sub(/\[.*/, "", num)
		sub(/.*=[ \t]*/, "", num)
		gsub(/[ \t]/, "", num)
		full = pkg
		for (i = 1; i <= depth; i++)
			if (kind[i] == "M")
				full = full "." name[i]
		printf "\t{ \"%s\", %d },\n", full, num
		count++
	}
	# Walk the braces of the line in order.
	rest = line
	while (match(rest, /[{}]/)) {
		ch = substr(rest, RSTART, 1)
		before = substr(rest, 1, RSTART - 1)
		rest = substr(rest, RSTART + 1)
		if (ch == "{") {
			depth++
			if (match(before, /message[ \t]+[A-Za-z0-9_]+/)) {
				kind[depth] = "M"
				n = substr(before, RSTART, RLENGTH)
				sub(/message[ \t]+/, "", n)
				name[depth] = n
			} else {
				kind[depth] = "O"
				name[depth] = ""
			}
		} else {
			depth--
		}
	}
}
END {
	print "\t{ 0, 0 },"
	print "};"
	if (depth != 0) {
		print "gen_secrets.awk: unbalanced braces in the schema" > "/dev/stderr"
		exit 1
	}
	if (count == 0) {
		print "gen_secrets.awk: no csi_secret fields found" > "/dev/stderr"
		exit 1
	}
}
