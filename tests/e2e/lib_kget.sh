# lib_kget.sh: kc_fast, the commonest read of the e2e scenarios without kubectl (sourced by
# lib_attacher.sh). kubectl is a Go program: each run costs 0.2 s of CPU at start-up, and in
# make test's parallel phase 300 runs a minute, most of them polls, were half of both cores.
#
# kc_fast ARGS...   for `get RES[,RES...] [NAME] [-n NS | -A] -o json|jsonpath={.a.b\.c}` against
#                   a plain-HTTP kube-emulator ($S): one curl and one jq, printing what kubectl
#                   prints (a list as kind List with each item's apiVersion and kind, no
#                   managedFields; a jsonpath's string or number, nothing for a missing field)
#                   and failing as it fails (status 1 when the object does not exist).
#                   Status 3: not a form it serves (a selector, another output, another
#                   resource, TLS); the caller runs kubectl.
# Resource names as kubectl takes them: plural, singular or short name of the kinds below.
kget_res() { # NAME -> "path namespaced Kind apiVersion", or status 1
	case $1 in
	pod|pods|po) echo "api/v1 pods 1 Pod v1" ;;
	pvc|persistentvolumeclaim|persistentvolumeclaims) echo "api/v1 persistentvolumeclaims 1 PersistentVolumeClaim v1" ;;
	pv|persistentvolume|persistentvolumes) echo "api/v1 persistentvolumes 0 PersistentVolume v1" ;;
	node|nodes|no) echo "api/v1 nodes 0 Node v1" ;;
	event|events|ev) echo "api/v1 events 1 Event v1" ;;
	volumeattachment|volumeattachments) echo "apis/storage.k8s.io/v1 volumeattachments 0 VolumeAttachment storage.k8s.io/v1" ;;
	csistoragecapacity|csistoragecapacities) echo "apis/storage.k8s.io/v1 csistoragecapacities 1 CSIStorageCapacity storage.k8s.io/v1" ;;
	csinode|csinodes) echo "apis/storage.k8s.io/v1 csinodes 0 CSINode storage.k8s.io/v1" ;;
	volumesnapshot|volumesnapshots|vs) echo "apis/snapshot.storage.k8s.io/v1 volumesnapshots 1 VolumeSnapshot snapshot.storage.k8s.io/v1" ;;
	volumesnapshotcontent|volumesnapshotcontents|vsc|vscs) echo "apis/snapshot.storage.k8s.io/v1 volumesnapshotcontents 0 VolumeSnapshotContent snapshot.storage.k8s.io/v1" ;;
	volumegroupsnapshot|volumegroupsnapshots|vgs) echo "apis/groupsnapshot.storage.k8s.io/v1 volumegroupsnapshots 1 VolumeGroupSnapshot groupsnapshot.storage.k8s.io/v1" ;;
	volumegroupsnapshotcontent|volumegroupsnapshotcontents|vgsc|vgscs) echo "apis/groupsnapshot.storage.k8s.io/v1 volumegroupsnapshotcontents 0 VolumeGroupSnapshotContent groupsnapshot.storage.k8s.io/v1" ;;
	*) return 1 ;;
	esac
}

# a jsonpath of plain fields, {.a.b\.c.d}, as jq's .["a"]["b.c"]["d"]; status 1 for anything else
kget_jq_path() {
	local p=$1 out="" field="" i c
	[[ $p == "{."*"}" ]] || return 1
	p=${p:2:${#p}-3}
	[ -n "$p" ] || return 1
	for ((i = 0; i < ${#p}; i++)); do
		c=${p:i:1}
		if [ "$c" = '\' ] && [ "${p:i+1:1}" = . ]; then
			field+=.; i=$((i + 1))
		elif [ "$c" = . ]; then
			[ -n "$field" ] || return 1
			out+="[\"$field\"]"; field=""
		elif [[ $c == [][\*\?@\(\)\ \"\$] ]]; then
			return 1 # filters, ranges, wildcards: kubectl's
		else
			field+=$c
		fi
	done
	[ -n "$field" ] || return 1
	echo ".$out[\"$field\"]"
}

kc_fast() {
	[ "${1:-}" = get ] && [[ ${S:-} == http://* ]] || return 3
	shift
	local res="" name="" ns=default all=0 out="" path spec
	while [ $# -gt 0 ]; do
		case $1 in
		-n|--namespace) ns=$2; shift 2 ;;
		-n=*|--namespace=*) ns=${1#*=}; shift ;;
		-A|--all-namespaces) all=1; shift ;;
		-o) out=$2; shift 2 ;;
		-o=*|--output=*) out=${1#*=}; shift ;;
		-o*) out=${1#-o}; shift ;;
		-*) return 3 ;;
		*) if [ -z "$res" ]; then res=$1; elif [ -z "$name" ]; then name=$1; else return 3; fi
		   shift ;;
		esac
	done
	local jqpath=""
	case $out in
	json) ;;
	jsonpath=*) [ -n "$name" ] || return 3
		jqpath=$(kget_jq_path "${out#jsonpath=}") || return 3 ;;
	*) return 3 ;;
	esac
	if [[ $res == *,* ]]; then # kinds a,b,c: one List of a's items, then b's, then c's
		[ -z "$name" ] && [ "$out" = json ] || return 3
		local r lists="" where=(-n "$ns")
		[ $all = 0 ] || where=(-A)
		for r in ${res//,/ }; do kget_res "$r" >/dev/null || return 3; done
		for r in ${res//,/ }; do
			lists+=$(kc_fast get "$r" "${where[@]}" -o json) || return 1
		done
		jq -s '{apiVersion: "v1", items: [.[].items[]], kind: "List", metadata: {resourceVersion: ""}}' \
			<<<"$lists"
		return
	fi
	spec=$(kget_res "$res") || return 3
	# shellcheck disable=SC2086 # the fields: prefix plural namespaced Kind apiVersion
	set -- $spec
	path="$S/$1"
	if [ "$3" = 1 ] && [ $all = 0 ]; then path+="/namespaces/$ns"; fi
	path+="/$2"
	if [ -n "$name" ]; then
		[ $all = 0 ] || return 3
		local body
		body=$(curl -sf --max-time 10 "$path/$name") || {
			echo "Error from server (NotFound): $2 \"$name\" not found" >&2
			return 1
		}
		if [ -n "$jqpath" ]; then
			jq -j "$jqpath | if . == null then empty elif type == \"object\" or type == \"array\"
				then error(\"not a scalar\") else . end" <<<"$body" 2>/dev/null && return 0
			# an object or a list: kubectl prints Go's map[...] form; let it
			return 3
		fi
		jq 'del(.metadata.managedFields)' <<<"$body"
		return
	fi
	local list
	list=$(curl -sf --max-time 10 "$path") || { echo "Error from server: GET $path failed" >&2; return 1; }
	jq --arg k "$4" --arg v "$5" \
		'{apiVersion: "v1", items: [.items[] | {apiVersion: $v, kind: $k} + . |
		  del(.metadata.managedFields)], kind: "List", metadata: {resourceVersion: ""}}' <<<"$list"
}
