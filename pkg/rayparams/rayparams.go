// Package rayparams is KubeRay's vocabulary, in one leaf package that the Ray controllers, the dashboard
// client, diagnose and raysim share: the labels, annotations, finalizers and port names KubeRay puts on
// what it makes (so kubectl habits and selectors written for KubeRay carry over), the names it gives
// (the head Service, the head container), and what its API says about a Ray node's resources (how a
// group's top-level resources become rayStartParams, which Kubernetes resource names are GPUs).
//
// It defines these itself rather than importing KubeRay's controllers/ray/utils, which would bring
// KubeRay's dashboard client, feature gates and the Gateway API types along.
package rayparams

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

var migGPU = regexp.MustCompile(`nvidia\.com/mig-\d+g\.\d+gb$`)

// IsGPU tells GPU resource names ("nvidia.com/gpu", MIG slices) from others.
func IsGPU(name string) bool {
	return strings.HasSuffix(name, "gpu") || migGPU.MatchString(name)
}

// ApplyGroupResources turns a worker or head group's top-level `resources` (KubeRay v1.5) into
// rayStartParams, as KubeRay does: CPU, memory and GPUs into num-cpus, memory and num-gpus, anything
// else into the `resources` JSON.
func ApplyGroupResources(params map[string]string, res map[string]string) {
	if len(res) == 0 {
		return
	}
	custom := map[string]float64{}
	for name, v := range res {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			continue
		}
		switch n := strings.ToLower(name); {
		case n == "cpu":
			params["num-cpus"] = strconv.FormatInt(q.Value(), 10)
		case n == "memory":
			params["memory"] = strconv.FormatInt(q.Value(), 10)
		case IsGPU(n):
			params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
		default:
			custom[name] = q.AsApproximateFloat64()
		}
	}
	if len(custom) > 0 {
		b, _ := json.Marshal(custom)
		params["resources"] = "'" + string(b) + "'"
	}
}

// acceleratorRayResources are the accelerators KubeRay makes Ray custom resources of, by Kubernetes
// resource name.
var acceleratorRayResources = map[string]string{
	"aws.amazon.com/neuroncore": "neuron_cores",
	"google.com/tpu":            "TPU",
}

// AddAcceleratorResource adds to rayStartParams' `resources` JSON the first (by name) accelerator of the
// container's limits that Ray knows as a custom resource (google.com/tpu as TPU, neuron cores as
// neuron_cores), as KubeRay does, unless the params name one already. A `resources` value that is no
// JSON object is left alone.
func AddAcceleratorResource(params map[string]string, limits map[string]resource.Quantity) {
	custom := map[string]float64{}
	if s, ok := params["resources"]; ok {
		if json.Unmarshal([]byte(strings.Trim(s, "'\"` ")), &custom) != nil {
			return
		}
	}
	for _, ray := range acceleratorRayResources {
		if _, named := custom[ray]; named {
			return
		}
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ray, ok := acceleratorRayResources[name]
		if q := limits[name]; ok && !q.IsZero() {
			custom[ray] = q.AsApproximateFloat64()
			b, _ := json.Marshal(custom)
			params["resources"] = "'" + string(b) + "'"
			return
		}
	}
}
