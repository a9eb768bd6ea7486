#!/usr/bin/env bash
# Regenerates rayctl's generated sources:
#   pkg/apiserver/openapi/zz_generated.openapi.go  (openapi-gen, built-in API types)
#   configs/crds/ray.io_*.json                      (controller-gen, KubeRay ray.io/v1 CRDs)
#   configs/crds/gateway.networking.k8s.io_*.json   (the Gateway API's published standard-channel CRDs)
# The CRDs are kept as JSON (hack/crdfile): rayctl decodes the Ray CRDs at every cold start.
#
# The generators are built from the pinned versions in hack/tools/go.mod into
# _output/bin. The inputs (k8s.io/api, KubeRay's API types, ...) are resolved
# through the root module, so their versions are the ones rayctl builds with.
# Running the script twice gives identical output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/_output/bin"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

cd "${ROOT}"
mkdir -p "${BIN}"

echo "==> building generators (hack/tools)"
(cd hack/tools && go build -o "${BIN}/" \
	k8s.io/kube-openapi/cmd/openapi-gen \
	sigs.k8s.io/controller-tools/cmd/controller-gen)

# --- OpenAPI definitions for the built-in API groups ------------------------------
# Every package whose types are referenced from these must be listed too, or the
# reference is emitted as a bare Go path that no definition answers to
# (batch/v1's Job refers to scheduling/v1alpha3 types, for example).
OPENAPI_PKGS=(
	k8s.io/api/core/v1
	k8s.io/api/apps/v1
	k8s.io/api/batch/v1
	k8s.io/api/rbac/v1
	k8s.io/api/coordination/v1
	k8s.io/api/events/v1
	k8s.io/api/discovery/v1
	k8s.io/api/storage/v1
	k8s.io/api/networking/v1
	k8s.io/api/node/v1
	k8s.io/api/authorization/v1
	k8s.io/api/authentication/v1
	k8s.io/api/autoscaling/v1
	k8s.io/api/policy/v1
	k8s.io/api/scheduling/v1alpha3
	k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1
	k8s.io/apimachinery/pkg/apis/meta/v1
	k8s.io/apimachinery/pkg/runtime
	k8s.io/apimachinery/pkg/version
	k8s.io/apimachinery/pkg/api/resource
	k8s.io/apimachinery/pkg/util/intstr
)
OPENAPI_DIR=pkg/apiserver/openapi
OPENAPI_FILE=zz_generated.openapi.go

echo "==> openapi-gen -> ${OPENAPI_DIR}/${OPENAPI_FILE}"
mkdir -p "${OPENAPI_DIR}"
rm -f "${OPENAPI_DIR}/${OPENAPI_FILE}"
# API rule violations of upstream types are not ours to fix: they go to a report
# file (which also keeps openapi-gen from failing on them).
"${BIN}/openapi-gen" \
	--output-dir "${OPENAPI_DIR}" \
	--output-pkg github.com/rayctl/rayctl/${OPENAPI_DIR} \
	--output-file "${OPENAPI_FILE}" \
	--go-header-file hack/boilerplate.go.txt \
	--report-filename hack/api-rules-violations.list \
	"${OPENAPI_PKGS[@]}"

# Fail loudly on references that no generated definition answers to.
if grep -n 'ref("' "${OPENAPI_DIR}/${OPENAPI_FILE}"; then
	echo "openapi-gen emitted references by Go path (above): add their packages to OPENAPI_PKGS" >&2
	exit 1
fi

# --- KubeRay CRDs -------------------------------------------------------------------
CRD_DIR=configs/crds
GENERATED="$(mktemp -d)"
ADDITIONS="$(mktemp -d)"
trap 'rm -rf "${GENERATED}" "${ADDITIONS}"' EXIT
echo "==> controller-gen -> ${CRD_DIR}"
mkdir -p "${CRD_DIR}"
rm -f "${CRD_DIR}"/*.json
# Only ray.io/v1 (KubeRay's v1alpha1 is left out). Options as KubeRay's own
# Makefile uses them: descriptions dropped (maxDescLen=0); generateEmbeddedObjectMeta
# keeps labels/annotations of the embedded pod templates from being pruned;
# allowDangerousTypes admits the float fields of the API.
"${BIN}/controller-gen" \
	crd:maxDescLen=0,generateEmbeddedObjectMeta=true,allowDangerousTypes=true \
	paths=github.com/ray-project/kuberay/ray-operator/apis/ray/v1 \
	output:crd:artifacts:config="${GENERATED}"

# The fields KubeRay v1.7 added (its module's source is not served by the Go module proxy, v1.6.2's
# is): generated from rayctl's declarations in hack/kuberay17 and merged into the CRDs above.
"${BIN}/controller-gen" \
	crd:maxDescLen=0,generateEmbeddedObjectMeta=true,allowDangerousTypes=true \
	paths=./hack/kuberay17 \
	output:crd:artifacts:config="${ADDITIONS}"
go run ./hack/crdmerge -additions "${ADDITIONS}" -into "${GENERATED}"
# Written as JSON into configs/crds.
(cd "${GENERATED}" && ls ray.io_*.yaml) | xargs go run ./hack/crdcopy -from "${GENERATED}" -into "${CRD_DIR}"

# --- Gateway API CRDs ----------------------------------------------------------------
# The Gateway API project publishes its CRDs (not Go types to generate them from) in its Go module, under
# config/crd/standard; the version is hack/gateway-api-version (v1.7.0 needs Go 1.27, newer than rayctl's
# toolchain, which will not download it). The standard channel's route-and-gateway core is served: GatewayClass,
# Gateway, HTTPRoute, GRPCRoute and ReferenceGrant (not TLS/TCP/UDPRoute, ListenerSet or BackendTLSPolicy, nor
# the ValidatingAdmissionPolicy the bundle ships). Descriptions are dropped, as for the Ray CRDs.
GATEWAY_API_VERSION="$(cat hack/gateway-api-version)"
GATEWAY_API_DIR="$(go mod download -json "sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
echo "==> Gateway API ${GATEWAY_API_VERSION} (${GATEWAY_API_DIR}) -> ${CRD_DIR}"
go run ./hack/crdcopy -from "${GATEWAY_API_DIR}/config/crd/standard" -into "${CRD_DIR}" \
	gateway.networking.k8s.io_gatewayclasses.yaml \
	gateway.networking.k8s.io_gateways.yaml \
	gateway.networking.k8s.io_httproutes.yaml \
	gateway.networking.k8s.io_grpcroutes.yaml \
	gateway.networking.k8s.io_referencegrants.yaml

ls -l "${OPENAPI_DIR}/${OPENAPI_FILE}" "${CRD_DIR}"/*.json
