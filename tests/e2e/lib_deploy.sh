# lib_deploy.sh: deploy/kubernetes as a user applies it to a real cluster, shared by
# tests/e2e/realnode.sh and tests/k8s-e2e/run.sh (sourced; needs KCSI_SRC or SRC).
#
# DEPLOY_COMPONENTS           the images deploy/kubernetes names (kcsi/<component>)
# snapshot_crds               prints the folder of external-snapshotter's CRDs in the Go module
#                             cache (client/v8 at the version tests/peers pins); fails without it
# deploy_kustomization DIR TAG [COMPONENT=IMAGE:TAG...]
#                             writes DIR/kustomization.yaml: deploy/kubernetes with every
#                             kcsi/<component> image at TAG, but the ones named, which take IMAGE
#                             at its TAG (the side-by-side run's upstream sidecars)

DEPLOY_COMPONENTS=(kcsi-loopplugin csi-provisioner csi-attacher csi-resizer csi-snapshotter
	livenessprobe csi-node-driver-registrar snapshot-controller)

deploy_src() { echo "${KCSI_SRC:-${SRC:?}}"; }

snapshot_crds() {
	local dir
	dir=$(cd "$(deploy_src)/tests/peers" && PATH=/usr/local/go/bin:$PATH GOFLAGS=-mod=readonly \
		go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8 \
		2>/dev/null)/config/crd
	[ -f "$dir/snapshot.storage.k8s.io_volumesnapshots.yaml" ] || return 1
	echo "$dir"
}

deploy_kustomization() {
	local dir=$1 tag=$2 c o swap
	shift 2
	mkdir -p "$dir"
	{
		echo "resources: [$(realpath --relative-to="$dir" "$(deploy_src)/deploy/kubernetes")]"
		echo "images:"
		for c in "${DEPLOY_COMPONENTS[@]}"; do
			swap=""
			for o in "$@"; do [ "${o%%=*}" = "$c" ] && swap=${o#*=}; done
			if [ -n "$swap" ]; then
				echo "  - {name: kcsi/$c, newName: ${swap%:*}, newTag: ${swap##*:}}"
			else
				echo "  - {name: kcsi/$c, newTag: $tag}"
			fi
		done
	} >"$dir/kustomization.yaml"
}
