package raycluster

import (
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// identifier is the ray.io/identifier value of a cluster's head or workers.
func identifier(cluster string, t rayv1.RayNodeType) string {
	return rayparams.CheckLabel(cluster + "-" + string(t))
}

// podGenerateName is KubeRay's Pod name prefix: `<prefix>-<type>-`, the prefix cut to 50 characters so
// the generated name fits 63.
func podGenerateName(prefix string, t rayv1.RayNodeType) string {
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	return strings.ToLower(prefix + "-" + string(t) + "-")
}

// podLabels returns KubeRay's labels for a Pod of the cluster, over the user's (which may not
// override cluster, node type or group).
func podLabels(t rayv1.RayNodeType, cluster, group string, user map[string]string) map[string]string {
	l := map[string]string{
		rayparams.LabelIsRayNode:  "yes",
		rayparams.LabelCluster:    cluster,
		rayparams.LabelNodeType:   string(t),
		rayparams.LabelGroup:      group,
		rayparams.LabelIdentifier: identifier(cluster, t),
		rayparams.LabelAppName:    rayparams.AppName,
		rayparams.LabelCreatedBy:  rayparams.CreatedBy,
	}
	for k, v := range user {
		if k == rayparams.LabelNodeType || k == rayparams.LabelGroup || k == rayparams.LabelCluster {
			continue
		}
		l[k] = v
	}
	return l
}

// headServiceLabels are the labels, and the selector, of the head Service.
func headServiceLabels(cluster string) map[string]string {
	return map[string]string{
		rayparams.LabelCluster:    cluster,
		rayparams.LabelNodeType:   string(rayv1.HeadNode),
		rayparams.LabelIdentifier: identifier(cluster, rayv1.HeadNode),
		rayparams.LabelAppName:    rayparams.AppName,
		rayparams.LabelCreatedBy:  rayparams.CreatedBy,
	}
}
