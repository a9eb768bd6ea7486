package raycluster

import (
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// Labels and values KubeRay puts on what it creates; kubectl selectors written for KubeRay work unchanged.
const (
	LabelCluster       = "ray.io/cluster"
	LabelNodeType      = "ray.io/node-type"
	LabelGroup         = "ray.io/group"
	LabelIsRayNode     = "ray.io/is-ray-node"
	LabelIdentifier    = "ray.io/identifier"
	LabelOriginatedCRD = "ray.io/originated-from-crd"
	LabelAppName       = "app.kubernetes.io/name"
	LabelCreatedBy     = "app.kubernetes.io/created-by"

	// KubeRay v1.7's multi-host indexing (RayMultiHostIndexing, on by default): every worker Pod
	// carries its replica's index within its group (0, 1, … the lowest free one); in a group of
	// numOfHosts > 1 a replica is numOfHosts Pods that also carry the replica's name (`<group>-xxxxx`,
	// unique across clusters) and their host index within it (0 … numOfHosts-1).
	LabelReplicaIndex = "ray.io/worker-group-replica-index"
	LabelReplicaName  = "ray.io/worker-group-replica-name"
	LabelHostIndex    = "ray.io/replica-host-index"
	// LabelHeadlessWorkerService names the cluster on its headless worker Service
	// (`<cluster>-headless`), made for clusters with a multi-host group.
	LabelHeadlessWorkerService = "ray.io/headless-worker-svc"

	// AppName and CreatedBy are the values of LabelAppName and LabelCreatedBy.
	AppName   = "kuberay"
	CreatedBy = "kuberay-operator"
	// HeadGroup is the ray.io/group of the head Pod.
	HeadGroup = "headgroup"

	// AnnotationOverwriteCmd ("true") keeps the Ray container's command as the user wrote it.
	AnnotationOverwriteCmd = "ray.io/overwrite-container-cmd"
	// AnnotationFTEnabled records on the head Pod whether GCS fault tolerance is on; on a
	// RayCluster, "true" is the older way of turning it on (see GCSFaultToleranceEnabled).
	AnnotationFTEnabled = "ray.io/ft-enabled"

	// ManagedByKubeRay is the spec.managedBy value (besides empty) this controller acts on; any other
	// value means an external controller owns the cluster.
	ManagedByKubeRay = "ray.io/kuberay-operator"
)

// identifier is the ray.io/identifier value of a cluster's head or workers.
func identifier(cluster string, t rayv1.RayNodeType) string {
	return checkLabel(cluster + "-" + string(t))
}

// CheckLabel keeps a label value within 63 characters and makes it start with an alphanumeric, as
// KubeRay does for the values it derives from names.
func CheckLabel(s string) string { return checkLabel(s) }

// checkLabel keeps a label value within 63 characters (dropping the front, as KubeRay does) and makes
// it start with an alphanumeric.
func checkLabel(s string) string {
	if len(s) > 63 {
		s = s[len(s)-63:]
	}
	if s != "" && strings.ContainsRune("-_.", rune(s[0])) {
		s = "r" + s[1:]
	}
	return s
}

// podGenerateName is KubeRay's Pod name prefix: `<prefix>-<type>-`, the prefix cut to 50 characters so
// the generated name fits 63.
func podGenerateName(prefix string, t rayv1.RayNodeType) string {
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	return strings.ToLower(prefix + "-" + string(t) + "-")
}

// HeadServiceName is the name of the cluster's head Service: spec.headGroupSpec.headService.metadata.name
// if set, else `<cluster>-head-svc`.
func HeadServiceName(c *rayv1.RayCluster) string {
	if hs := c.Spec.HeadGroupSpec.HeadService; hs != nil && hs.Name != "" {
		return hs.Name
	}
	return c.Name + "-head-svc"
}

// podLabels returns KubeRay's labels for a Pod of the cluster, over the user's (which may not
// override cluster, node type or group).
func podLabels(t rayv1.RayNodeType, cluster, group string, user map[string]string) map[string]string {
	l := map[string]string{
		LabelIsRayNode:  "yes",
		LabelCluster:    cluster,
		LabelNodeType:   string(t),
		LabelGroup:      group,
		LabelIdentifier: identifier(cluster, t),
		LabelAppName:    AppName,
		LabelCreatedBy:  CreatedBy,
	}
	for k, v := range user {
		if k == LabelNodeType || k == LabelGroup || k == LabelCluster {
			continue
		}
		l[k] = v
	}
	return l
}

// headServiceLabels are the labels, and the selector, of the head Service.
func headServiceLabels(cluster string) map[string]string {
	return map[string]string{
		LabelCluster:    cluster,
		LabelNodeType:   string(rayv1.HeadNode),
		LabelIdentifier: identifier(cluster, rayv1.HeadNode),
		LabelAppName:    AppName,
		LabelCreatedBy:  CreatedBy,
	}
}
